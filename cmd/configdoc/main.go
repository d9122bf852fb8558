// Command configdoc writes the table of every declared dynamic config setting into
// docs/configuration.md, between the markers of dynamicconfig (DocBegin, DocEnd), so that the
// documented keys, types and defaults are the ones the server reads. Run it from the
// repository root after declaring or changing a setting:
//
//	go run ./cmd/configdoc [-check] [docs/configuration.md]
//
// With -check it changes nothing and exits 1 when the file is out of date.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/vigilhq/vigil/dynamicconfig"
	// Link every package that declares settings.
	_ "github.com/vigilhq/vigil/server"
)

func main() {
	check := flag.Bool("check", false, "exit 1 if the file is out of date instead of writing it")
	flag.Parse()
	path := "docs/configuration.md"
	if flag.NArg() > 0 {
		path = flag.Arg(0)
	}
	changed, err := update(path, !*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if changed && *check {
		fmt.Fprintf(os.Stderr, "configdoc: %s's settings table differs from the declarations; run make config-doc\n", path)
		os.Exit(1)
	}
}

// update renders the table into path; it reports whether the file's block was out of date, and
// writes the new content when write is set.
func update(path string, write bool) (bool, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	var table bytes.Buffer
	if err := dynamicconfig.WriteMarkdown(&table, dynamicconfig.Declared()); err != nil {
		return false, err
	}
	updated, err := dynamicconfig.ReplaceDocBlock(string(old), table.String())
	if err != nil {
		return false, err
	}
	if updated == string(old) {
		return false, nil
	}
	if write {
		return true, os.WriteFile(path, []byte(updated), 0o644)
	}
	return true, nil
}
