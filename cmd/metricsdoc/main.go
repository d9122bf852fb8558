// Command metricsdoc writes the table of every declared metric into docs/metrics.md, between the
// markers of common/metrics (DocBegin, DocEnd), so that the documented names are the exported
// ones. Run it from the repository root after declaring a metric:
//
//	go run ./cmd/metricsdoc [-check] [docs/metrics.md]
//
// With -check it changes nothing and exits 1 when the file is out of date.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/vigilhq/vigil/common/metrics"
	// Link every package that declares metrics.
	_ "github.com/vigilhq/vigil/server"
)

func main() {
	check := flag.Bool("check", false, "exit 1 if the file is out of date instead of writing it")
	flag.Parse()
	path := "docs/metrics.md"
	if flag.NArg() > 0 {
		path = flag.Arg(0)
	}
	changed, err := update(path, !*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
	if changed && *check {
		fmt.Fprintf(os.Stderr, "metricsdoc: %s's metrics table differs from the declarations; run make metrics-doc\n", path)
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
	if err := metrics.WriteMarkdown(&table, metrics.Declared()); err != nil {
		return false, err
	}
	updated, err := metrics.ReplaceDocBlock(string(old), table.String())
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
