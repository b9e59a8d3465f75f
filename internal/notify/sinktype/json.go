package sinktype

import (
	"bytes"
	"encoding/json"
)

// JSON returns v as one line of JSON, as vendors' chat APIs take it: &, <
// and > as they are (not escaped for HTML), no line feed at the end.
func JSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
