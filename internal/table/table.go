// Package table draws kdiag's tables: borderless and left-aligned, as ps
// and ss draw theirs, through olekukonko/tablewriter, without the padding
// it leaves at the end of lines. scan and repro draw with it.
package table

import (
	"bufio"
	"bytes"
	"io"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// CellPad is the space right of every cell.
const CellPad = "  "

// Options are the tablewriter options of every kdiag table.
func Options() []tablewriter.Option {
	return []tablewriter.Option{
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		})),
		tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Formatting: tw.CellFormatting{AutoFormat: tw.Off},
				Padding:    tw.CellPadding{Global: tw.Padding{Right: CellPad, Overwrite: true}},
			},
			Row: tw.CellConfig{
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Formatting: tw.CellFormatting{AutoWrap: tw.WrapNone},
				Padding:    tw.CellPadding{Global: tw.Padding{Right: CellPad, Overwrite: true}},
			},
		}),
	}
}

// Render draws header and rows. A cell with newlines spans that many
// lines.
func Render(w io.Writer, header []string, rows [][]string) error {
	bw := bufio.NewWriter(w)
	t := tablewriter.NewTable(&lineTrimmer{w: bw}, Options()...)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	if err := t.Render(); err != nil {
		return err
	}
	return bw.Flush()
}

// Stream draws the table Render draws for n rows, which fill writes into
// row one at a time, in column widths measured in a first pass over them:
// a listing of 20,000 sockets would otherwise hold every row's cells, and
// tablewriter its own copy of them, at once (37 MB peak RSS, 1.2 s).
func Stream(w io.Writer, header []string, n int, fill func(i int, row []string)) error {
	widths := tw.NewMapper[int, int]()
	row := make([]string, len(header))
	measure := func(cells []string) {
		for i, c := range cells {
			widths.Set(i, max(widths.Get(i), twwidth.Width(c)+len(CellPad)))
		}
	}
	measure(header)
	for i := range n {
		fill(i, row)
		measure(row)
	}
	bw := bufio.NewWriter(w)
	t := tablewriter.NewTable(&lineTrimmer{w: bw}, append(Options(),
		tablewriter.WithStreaming(tw.StreamConfig{Enable: true, StrictColumns: true}),
		tablewriter.WithColumnWidths(widths))...)
	if err := t.Start(); err != nil {
		return err
	}
	t.Header(header)
	for i := range n {
		fill(i, row)
		if err := t.Append(row); err != nil {
			return err
		}
	}
	if err := t.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// lineTrimmer drops the spaces tablewriter pads each line's last cell with.
type lineTrimmer struct {
	w    *bufio.Writer
	line []byte
}

func (l *lineTrimmer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.line = append(l.line, p...)
			break
		}
		l.line = append(l.line, p[:i]...)
		l.w.Write(bytes.TrimRight(l.line, " "))
		l.w.WriteByte('\n')
		l.line = l.line[:0]
		p = p[i+1:]
	}
	return n, nil
}
