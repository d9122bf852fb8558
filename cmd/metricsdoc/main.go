// Command metricsdoc writes the table of every declared metric into docs/metrics.md, between the
// markers of common/metrics (DocBegin, DocEnd), so that the documented names are the exported
// ones. Run it from the repository root after declaring a metric:
//
//	go run ./cmd/metricsdoc [-check] [docs/metrics.md]
//
// With -check it changes nothing and exits 1 when the file is out of date.
package main

import (
	"io"

	"github.com/vigilhq/vigil/common/metrics"
	"github.com/vigilhq/vigil/internal/docblock"
	// Link every package that declares metrics.
	_ "github.com/vigilhq/vigil/server"
)

var block = docblock.Block{Begin: metrics.DocBegin, End: metrics.DocEnd, Render: func(w io.Writer) error {
	return metrics.WriteMarkdown(w, metrics.Declared())
}}

func main() { block.Main("metricsdoc", "docs/metrics.md", "metrics-doc") }
