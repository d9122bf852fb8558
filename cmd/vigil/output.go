package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"
)

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatJSONL = "jsonl"
	formatYAML  = "yaml"
)

var formats = []string{formatTable, formatJSON, formatJSONL, formatYAML}

// outputFlags are the root's persistent output flags.
type outputFlags struct {
	output   string
	noHeader bool
}

func (o *outputFlags) register(root *cobra.Command) {
	fs := root.PersistentFlags()
	fs.StringVarP(&o.output, "output", "o", formatTable, "output format: table, json (indented; a list is one array), jsonl (one object per line) or yaml")
	fs.BoolVar(&o.noHeader, "no-header", false, "leave the header row out of tables")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// printer returns the printer of cmd's output, or a usage error for an unknown -o.
func (o *outputFlags) printer(cmd *cobra.Command) (*printer, error) {
	f := strings.ToLower(o.output)
	if f == "text" { // worker watch's former name of the table
		f = formatTable
	}
	for _, known := range formats {
		if f == known {
			return &printer{format: f, noHeader: o.noHeader, w: cmd.OutOrStdout()}, nil
		}
	}
	return nil, usagef("unknown output format %q (want %s)", o.output, strings.Join(formats, ", "))
}

// printer prints what a read command found, in the format of -o. Every command prints through
// it, so that protobuf messages are encoded alike everywhere: protojson's field names
// (lowerCamelCase), enums by name, timestamps in RFC 3339, unset fields left out, and the
// whitespace normalized (protojson varies it on purpose).
type printer struct {
	format   string
	noHeader bool
	w        io.Writer
}

// table is a table's header and rows, aligned by a tabwriter.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

// field adds a NAME VALUE row to a key/value table, unless value is empty.
func (t *table) field(name, value string) {
	if value != "" {
		t.rows = append(t.rows, []string{name, value})
	}
}

func (p *printer) writeTable(t *table) error {
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	if len(t.header) > 0 && !p.noHeader {
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	}
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// object prints one object: v (a proto.Message or a value encoding/json encodes) as a JSON,
// JSON-line or YAML document, or, for table, what asTable writes.
func (p *printer) object(v any, asTable func(w io.Writer) error) error {
	if p.format == formatTable {
		return asTable(p.w)
	}
	data, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return p.documents([]json.RawMessage{data}, false)
}

// list prints items: table rows with the header, a JSON array, one JSON object per line, or a
// YAML sequence.
func list[T any](p *printer, items []T, header []string, row func(T) []string) error {
	if p.format == formatTable {
		t := &table{header: header}
		for _, it := range items {
			t.row(row(it)...)
		}
		return p.writeTable(t)
	}
	docs := make([]json.RawMessage, len(items))
	for i, it := range items {
		var err error
		if docs[i], err = encodeJSON(it); err != nil {
			return err
		}
	}
	return p.documents(docs, true)
}

// documents writes compact JSON documents in p's format; asList makes them one array (json) or
// sequence (yaml).
func (p *printer) documents(docs []json.RawMessage, asList bool) error {
	var buf bytes.Buffer
	switch p.format {
	case formatJSONL:
		for _, d := range docs {
			buf.Write(d)
			buf.WriteByte('\n')
		}
	case formatJSON:
		var doc []byte
		if asList {
			doc = []byte("[]")
			if len(docs) > 0 {
				doc = append(append([]byte("["), bytes.Join(rawBytes(docs), []byte(","))...), ']')
			}
		} else {
			doc = docs[0]
		}
		if err := json.Indent(&buf, doc, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
	case formatYAML:
		var node yaml.Node
		if asList {
			node = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for _, d := range docs {
				n, err := yamlNode(d)
				if err != nil {
					return err
				}
				node.Content = append(node.Content, n)
			}
		} else {
			n, err := yamlNode(docs[0])
			if err != nil {
				return err
			}
			node = *n
		}
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(&node); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
	}
	_, err := p.w.Write(buf.Bytes())
	return err
}

// encodeJSON encodes v compactly: protobuf messages with protojson, anything else with
// encoding/json.
func encodeJSON(v any) (json.RawMessage, error) {
	var data []byte
	var err error
	if m, ok := v.(proto.Message); ok {
		data, err = protojson.Marshal(m)
	} else {
		data, err = json.Marshal(v)
	}
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// yamlNode parses a JSON document (JSON is YAML) into a node in block style, keeping the
// order of its keys.
func yamlNode(doc json.RawMessage) (*yaml.Node, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(doc, &n); err != nil {
		return nil, err
	}
	var block func(*yaml.Node)
	block = func(n *yaml.Node) {
		n.Style &^= yaml.FlowStyle
		if n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle) != 0 && n.Tag == "!!str" {
			// Keep a string quoted only where YAML needs it (a number or a bool as a string).
			n.Style &^= yaml.DoubleQuotedStyle
		}
		for _, c := range n.Content {
			block(c)
		}
	}
	block(&n)
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return n.Content[0], nil
	}
	return &n, nil
}

// timestamp formats a time for a table, or "" when it is unset.
func timestamp(t interface{ AsTime() time.Time }, set bool) string {
	if !set {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// orDash is s, or "-" when s is empty (a table cell that must not be blank).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func rawBytes(docs []json.RawMessage) [][]byte {
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i] = d
	}
	return out
}
