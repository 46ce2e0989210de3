// Package docs checks the documentation against the repository: the README stays one
// screen with its quick start, every relative link of the Markdown files leads to a
// file and a heading that exist, docs/README.md indexes every page, and
// docs/troubleshooting.md has a section for every reason an App can give.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const root = "../.."

// markdownFiles returns the Markdown files the project writes: the top-level ones and
// those under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestReadme: at most 150 lines, and the two commands of the quick start.
func TestReadme(t *testing.T) {
	readme := read(t, filepath.Join(root, "README.md"))
	if n := strings.Count(readme, "\n"); n > 150 {
		t.Errorf("README.md has %d lines, want at most 150: move the details to a page of docs/", n)
	}
	for _, command := range []string{"make dev", "make test"} {
		if !strings.Contains(readme, command) {
			t.Errorf("README.md does not show %q", command)
		}
	}
}

var (
	// link is a Markdown link or image: [text](target).
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// fence opens or closes a code block, whose text holds no links.
	fence = regexp.MustCompile("^\\s*```")
	// inlineCode is a code span, whose text holds no links either.
	inlineCode = regexp.MustCompile("`[^`]*`")
)

// anchors returns GitHub's anchors of the headings of a Markdown text.
func anchors(text string) []string {
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	var out []string
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		heading = strings.NewReplacer("`", "", "*", "").Replace(heading)
		out = append(out, strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(heading), ""), " ", "-"))
	}
	return out
}

// TestLinks: every relative link leads to a file of the repository, and a link to a
// heading (#anchor) to a heading of that file.
func TestLinks(t *testing.T) {
	for _, file := range markdownFiles(t) {
		text := read(t, file)
		inCode := false
		for n, line := range strings.Split(text, "\n") {
			if fence.MatchString(line) {
				inCode = !inCode
			}
			if inCode {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
				}
				where := strings.TrimPrefix(file, root+"/") + ":" + strconv.Itoa(n+1)
				info, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s: link %q: %v", where, target, err)
					continue
				}
				if anchor != "" && !info.IsDir() && strings.HasSuffix(dest, ".md") && !slices.Contains(anchors(read(t, dest)), anchor) {
					t.Errorf("%s: link %q: no heading #%s in %s", where, target, anchor, strings.TrimPrefix(dest, root+"/"))
				}
			}
		}
	}
}

// TestIndex: docs/README.md links every page of docs/.
func TestIndex(t *testing.T) {
	index := filepath.Join(root, "docs", "README.md")
	linked := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(read(t, index), -1) {
		path, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Join(root, "docs", path)] = true
	}
	for _, file := range markdownFiles(t) {
		if strings.HasPrefix(file, filepath.Join(root, "docs")+"/") && file != index && !linked[file] {
			t.Errorf("docs/README.md does not link %s: add it to the index", strings.TrimPrefix(file, root+"/"))
		}
	}
}

// reasons returns the values of the string constants whose names start with prefix in
// a Go file.
func reasons(t *testing.T, path, prefix string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue // another constant's value: listed where it is defined
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, value)
			}
		}
	}
	return out
}

// TestTroubleshooting: a section (### Reason) for every condition and Event reason of
// the API, and every Event reason of the controllers named on the page.
func TestTroubleshooting(t *testing.T) {
	page := read(t, filepath.Join(root, "docs", "troubleshooting.md"))
	sections := anchors(page)
	api := filepath.Join(root, "pkg", "apis", "appcontroller", "v1", "wellknown.go")
	conditionReasons, eventReasons := reasons(t, api, "Reason"), reasons(t, api, "EventReason")
	if len(conditionReasons) < 20 || len(eventReasons) < 4 {
		t.Fatalf("read %d condition reasons and %d Event reasons from %s: the parser misses them", len(conditionReasons), len(eventReasons), api)
	}
	for _, reason := range append(conditionReasons, eventReasons...) {
		if !slices.Contains(sections, strings.ToLower(reason)) {
			t.Errorf("docs/troubleshooting.md has no section \"### %s\": what it means, what to do", reason)
		}
	}
	for _, file := range []string{"pkg/controller/loop.go", "pkg/controller/ingress/constants.go", "pkg/controller/nodelabel/constants.go"} {
		for _, reason := range reasons(t, filepath.Join(root, file), "Reason") {
			if !strings.Contains(page, "`"+reason+"`") {
				t.Errorf("docs/troubleshooting.md does not name the Event reason `%s` of %s", reason, file)
			}
		}
	}
}
