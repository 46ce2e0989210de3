// Command reprotar writes the release's archives reproducibly (make release): the same
// input and modification time give the same bytes.
//
//	reprotar tar --mtime EPOCH --out FILE.tar DIR
//	    a tar of the files and directories under DIR (names relative to DIR, sorted),
//	    every entry's time EPOCH, owner 0:0, mode 0644 (0755 for directories and
//	    executables): the release's OCI layout of the image
//	reprotar retime --mtime EPOCH FILE.tgz
//	    rewrites a gzipped tar in place with every entry's time EPOCH, keeping the
//	    entries, their order and the gzip header's extra field and comment: `helm
//	    package` stamps each file with the time of the packaging
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "reprotar:", err)
		os.Exit(1)
	}
}

const usage = "usage: reprotar tar --mtime EPOCH --out FILE.tar DIR | reprotar retime --mtime EPOCH FILE.tgz"

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fset := flag.NewFlagSet("reprotar "+args[0], flag.ContinueOnError)
	epoch := fset.String("mtime", "", "modification time of every entry, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	out := fset.String("out", "", "the tar to write (tar)")
	if err := fset.Parse(args[1:]); err != nil {
		return err
	}
	seconds, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil || fset.NArg() != 1 {
		return errors.New(usage)
	}
	mtime := time.Unix(seconds, 0).UTC()
	switch args[0] {
	case "tar":
		if *out == "" {
			return errors.New(usage)
		}
		return writeTar(fset.Arg(0), *out, mtime)
	case "retime":
		return retime(fset.Arg(0), mtime)
	default:
		return errors.New(usage)
	}
}

// writeTar writes the tree under dir to out.
func writeTar(dir, out string, mtime time.Time) error {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is neither a file nor a directory", path)
		}
		paths = append(paths, path)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	slices.Sort(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, path := range paths {
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case info.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		case info.Mode()&0o111 != 0:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o755, info.Size()
		default:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing the header of %s: %w", rel, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return fmt.Errorf("writing %s: %w", rel, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing the tar: %w", err)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// retime rewrites the gzipped tar at path with every entry's time mtime.
func retime(path string, mtime time.Time) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(in))
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	zw.Extra, zw.Comment, zw.Name = zr.Extra, zr.Comment, zr.Name
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime, time.Time{}, time.Time{}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing the header of %s: %w", hdr.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("copying %s: %w", hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing the tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("closing the gzip stream: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
