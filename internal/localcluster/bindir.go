package localcluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// BinDirEnv names the environment variable that points at the binaries' directory.
const BinDirEnv = "APP_CONTROLLER_BIN_DIR"

// KubeBinDirEnv names the environment variable that, when set, points at the
// directory of the kube-apiserver, kube-controller-manager and kube-scheduler to run
// instead of those of the binaries' directory (Options.KubeBinDir): another Kubernetes
// version's, such as bin/compat/1.34 of `make test-compat`.
const KubeBinDirEnv = "APP_CONTROLLER_KUBE_BIN_DIR"

// ModulePath is the module whose go.mod marks the repository root.
const ModulePath = "github.com/app-controller/app-controller"

// kwokStagesDir is the subdirectory of the binaries' directory with kwok's stage files.
const kwokStagesDir = "kwok-stages"

// BinDirFromEnv returns the directory holding the control plane binaries: $APP_CONTROLLER_BIN_DIR
// if set, else <repo root>/bin, the repository root being found by walking up from the
// working directory. It returns an error saying to run `make tools` if binaries are missing.
func BinDirFromEnv() (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("locating the control plane binaries: $%s is not set and %w", BinDirEnv, err)
		}
		dir = filepath.Join(root, "bin")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("locating the control plane binaries: %w", err)
	}
	if err := CheckBinDir(abs); err != nil {
		return "", err
	}
	return abs, nil
}

// CheckBinDir returns an error naming what is missing from dir (binaries, kwok stages),
// telling to run `make tools`.
func CheckBinDir(dir string) error {
	if missing := missingBinaries(dir, requiredBinaries); len(missing) > 0 {
		return fmt.Errorf("control plane binaries missing from %s: %s: run `make tools`", dir, strings.Join(missing, ", "))
	}
	if _, err := kwokStageFiles(filepath.Join(dir, kwokStagesDir)); err != nil {
		return err
	}
	return nil
}

// CheckKubeBinDir returns an error naming what is missing from dir, a directory of
// Options.KubeBinDir, telling how to build it.
func CheckKubeBinDir(dir string) error {
	if missing := missingBinaries(dir, controlPlaneBinaries); len(missing) > 0 {
		return fmt.Errorf("control plane binaries missing from %s: %s: build them with `make test-compat VERSIONS=MINOR` (bin/compat/MINOR)", dir, strings.Join(missing, ", "))
	}
	return nil
}

// missingBinaries returns the names of those that are not executable files in dir.
func missingBinaries(dir string, names []string) []string {
	var missing []string
	for _, name := range names {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	return missing
}

// RepoRoot returns the repository root: the nearest directory, from the working
// directory upwards, holding the go.mod of module github.com/app-controller/app-controller.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting the working directory: %w", err)
	}
	return findRepoRoot(wd)
}

// findRepoRoot walks up from dir to the directory whose go.mod declares ModulePath.
// go.mod files of other modules (such as hack/tools) are passed over.
func findRepoRoot(dir string) (string, error) {
	start := dir
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		switch {
		case err == nil:
			if modulePath(data) == ModulePath {
				return dir, nil
			}
		case !errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("reading %s: %w", filepath.Join(dir, "go.mod"), err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s in %s or any parent directory", ModulePath, start)
		}
		dir = parent
	}
}

// modulePath returns the module path declared in a go.mod file, or "".
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			if p, err := strconv.Unquote(fields[1]); err == nil {
				return p
			}
			return fields[1]
		}
	}
	return ""
}
