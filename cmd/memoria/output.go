package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/api"
)

// printJSON writes m as one line of JSON (the REST API's rendering).
func printJSON(w io.Writer, m proto.Message) error {
	b, err := api.MarshalJSON(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// printIndented writes v as indented JSON (the reports of long commands).
func printIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// excerpt shortens s to n characters on one line.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// shortCID abbreviates a CID for tables.
func shortCID(c string) string {
	if len(c) <= 16 {
		return c
	}
	return c[:8] + "…" + c[len(c)-6:]
}

// allPages collects every page of a listing: fetch returns a page's items
// and the next cursor, "" after the last page.
func allPages[T any](fetch func(cursor string) ([]T, string, error)) ([]T, error) {
	var all []T
	cursor := ""
	for {
		items, next, err := fetch(cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}
