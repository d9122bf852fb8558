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
	"io"

	"github.com/vigilhq/vigil/dynamicconfig"
	"github.com/vigilhq/vigil/internal/docblock"
	// Link every package that declares settings.
	_ "github.com/vigilhq/vigil/server"
)

var block = docblock.Block{Begin: dynamicconfig.DocBegin, End: dynamicconfig.DocEnd, Render: func(w io.Writer) error {
	return dynamicconfig.WriteMarkdown(w, dynamicconfig.Declared())
}}

func main() { block.Main("configdoc", "docs/configuration.md", "config-doc") }
