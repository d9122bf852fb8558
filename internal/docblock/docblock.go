// Package docblock keeps a generated block of a markdown page, between a begin and an end
// marker, equal to what a generator renders from the code's declarations: the metrics page and
// the dynamic settings table are kept so, and a test of each generator fails when its page is
// stale.
package docblock

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Block is one generated block: its markers and how to render its content.
type Block struct {
	Begin, End string
	Render     func(io.Writer) error
}

// Replace returns doc with the text between the block's markers replaced by content.
func (b Block) Replace(doc, content string) (string, error) {
	begin := strings.Index(doc, b.Begin)
	end := strings.Index(doc, b.End)
	if begin < 0 || end < begin {
		return "", fmt.Errorf("the document has no %q ... %q block", b.Begin, b.End)
	}
	return doc[:begin+len(b.Begin)] + "\n" + content + doc[end:], nil
}

// Update renders the block into the file at path. It reports whether the file's block was out
// of date, and writes the new content when write is set.
func (b Block) Update(path string, write bool) (bool, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var content bytes.Buffer
	if err := b.Render(&content); err != nil {
		return false, err
	}
	updated, err := b.Replace(string(old), content.String())
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	if updated == string(old) {
		return false, nil
	}
	if write {
		return true, os.WriteFile(path, []byte(updated), 0o644)
	}
	return true, nil
}

// Main is a generator's command line, `[-check] [path]`: it rewrites the block of path
// (defaultPath when none is given), or with -check changes nothing and exits 1 when the block is
// out of date, naming makeTarget as the fix.
func (b Block) Main(tool, defaultPath, makeTarget string) {
	check := flag.Bool("check", false, "exit 1 if the file is out of date instead of writing it")
	flag.Parse()
	path := defaultPath
	if flag.NArg() > 0 {
		path = flag.Arg(0)
	}
	changed, err := b.Update(path, !*check)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		os.Exit(1)
	}
	if changed && *check {
		fmt.Fprintf(os.Stderr, "%s: %s differs from the declarations; run make %s\n", tool, path, makeTarget)
		os.Exit(1)
	}
}
