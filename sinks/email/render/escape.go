package render

import (
	"fmt"
	"html"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/osteele/liquid"
	"github.com/osteele/liquid/expressions"
	"github.com/osteele/liquid/render"
)

// escapeName names the tag every {{ … }} of an HTML template becomes: it
// evaluates the expression (compiled once, at parse time) and writes the
// value HTML-escaped. It also names a filter that does the same, for the
// rare expression a tag cannot hold (one containing "%}"); a filter runs
// through reflection on every call, the tag does not. The name cannot
// collide with a template's own tags or filters (authors' names do not
// start with an underscore pair).
const escapeName = "__sendstream_html"

// compileEscape is the escape tag's compiler: it parses the expression
// once, and the renderer writes its value HTML-escaped.
func compileEscape(args string) (func(io.Writer, render.Context) error, error) {
	expr, err := expressions.Parse(args)
	if err != nil {
		return nil, err
	}
	return func(w io.Writer, ctx render.Context) error {
		v, err := ctx.Evaluate(expr)
		if err != nil {
			return err
		}
		s, ok := v.(string)
		switch {
		case !ok:
			s = escapeValue(v)
		case strings.ContainsAny(s, `<>&'"`): // else s is written as it is
			s = html.EscapeString(s)
		}
		_, err = io.WriteString(w, s)
		return err
	}, nil
}

// escapeValue is the escape filter, and the escape tag's way with values
// that are not strings: the value the way Liquid writes it, HTML-escaped.
func escapeValue(v any) string {
	var b strings.Builder
	writeValue(&b, v)
	return html.EscapeString(b.String())
}

// writeValue mirrors how Liquid writes an object: nil as nothing, lists as
// their elements concatenated, times in Liquid's format, the rest with fmt.
func writeValue(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		return
	case string:
		b.WriteString(x)
		return
	case time.Time:
		b.WriteString(x.Format("2006-01-02 15:04:05 -0700"))
		return
	case []byte:
		b.Write(x)
		return
	case liquid.Drop:
		writeValue(b, x.ToLiquid())
		return
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Array, reflect.Slice:
		for i := 0; i < rv.Len(); i++ {
			writeValue(b, rv.Index(i).Interface())
		}
	case reflect.Ptr:
		if !rv.IsNil() {
			writeValue(b, rv.Elem().Interface())
		}
	default:
		fmt.Fprint(b, v)
	}
}
