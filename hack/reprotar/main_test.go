package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// helmLike writes a gzipped tar as helm package does: each entry stamped with now, a
// gzip extra field and comment.
func helmLike(t *testing.T, path string, now time.Time) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Extra, zw.Comment = []byte("+helm"), "Helm"
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, body string }{{"c/Chart.yaml", "name: c\n"}, {"c/values.yaml", "a: 1\n"}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tarHeaders returns the headers of the tar read from r, in order.
func tarHeaders(t *testing.T, r io.Reader) []*tar.Header {
	t.Helper()
	tr := tar.NewReader(r)
	var headers []*tar.Header
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers = append(headers, hdr)
	}
}

// TestRetime packages the same files at two times: retimed, the two archives are the
// same bytes, every entry at the given time, and the gzip header's extra field and
// comment kept.
func TestRetime(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tgz"), filepath.Join(dir, "b.tgz")
	helmLike(t, a, time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	helmLike(t, b, time.Date(2026, 1, 1, 10, 0, 7, 0, time.UTC))
	for _, p := range []string{a, b} {
		if err := run([]string{"retime", "--mtime", "1700000000", p}); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Fatal("the same files packaged at two times differ once retimed")
	}
	zr, err := gzip.NewReader(bytes.NewReader(da))
	if err != nil {
		t.Fatal(err)
	}
	if string(zr.Extra) != "+helm" || zr.Comment != "Helm" {
		t.Errorf("gzip header extra %q comment %q, want helm's kept", zr.Extra, zr.Comment)
	}
	headers := tarHeaders(t, zr)
	for _, hdr := range headers {
		if !hdr.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: time %s, want 1700000000", hdr.Name, hdr.ModTime)
		}
	}
	if len(headers) != 2 {
		t.Errorf("%d entries, want 2", len(headers))
	}
}

// TestTar writes a directory twice, its files touched in between: the same bytes, names
// relative and sorted, executables 0755.
func TestTar(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layout")
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"oci-layout": 0o600, "index.json": 0o600, "blobs/sha256/ab": 0o700} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	out1, out2 := filepath.Join(t.TempDir(), "1.tar"), filepath.Join(t.TempDir(), "2.tar")
	if err := run([]string{"tar", "--mtime", "0", "--out", out1, dir}); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "index.json"), later, later); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"tar", "--mtime", "0", "--out", out2, dir}); err != nil {
		t.Fatal(err)
	}
	d1, _ := os.ReadFile(out1)
	d2, _ := os.ReadFile(out2)
	if !bytes.Equal(d1, d2) {
		t.Fatal("the same tree written twice differs")
	}
	var got []string
	for _, hdr := range tarHeaders(t, bytes.NewReader(d1)) {
		got = append(got, hdr.Name+" "+os.FileMode(hdr.Mode).String())
	}
	want := []string{"blobs/ -rwxr-xr-x", "blobs/sha256/ -rwxr-xr-x", "blobs/sha256/ab -rwxr-xr-x", "index.json -rw-r--r--", "oci-layout -rw-r--r--"}
	if len(got) != len(want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %q, want %q", i, got[i], want[i])
		}
	}
}
