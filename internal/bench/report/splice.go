package main

import (
	"errors"
	"strings"
)

const (
	beginMarker = "<!-- bench:begin -->"
	endMarker   = "<!-- bench:end -->"
)

// splice replaces what stands between the markers in doc (the markdown
// file given with -doc, docs/performance.md in `make bench`) with section,
// keeping the markers; doc must have each marker once, begin first.
func splice(doc, section string) (string, error) {
	if strings.Count(doc, beginMarker) != 1 || strings.Count(doc, endMarker) != 1 {
		return "", errors.New("the document needs exactly one " + beginMarker + " and one " + endMarker)
	}
	i := strings.Index(doc, beginMarker) + len(beginMarker)
	j := strings.Index(doc, endMarker)
	if j < i {
		return "", errors.New(endMarker + " comes before " + beginMarker)
	}
	return doc[:i] + "\n" + strings.TrimSpace(section) + "\n" + doc[j:], nil
}
