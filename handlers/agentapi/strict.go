package agentapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hyperops/hyperops/ops"
)

// maxJSONDepth bounds how deeply an agent's request may nest: the contract is three levels deep, and the
// walks over it (forbidden fields) recurse.
const maxJSONDepth = 16

// DecodeObject reads exactly one JSON object: a key given twice anywhere is refused naming its path (encoding/json
// would silently keep the last), so is anything after the object (`{…}}]]`), and so is nesting deeper than
// maxJSONDepth. Numbers stay json.Number. A DM's request and an MCP call's arguments are read the same way.
func DecodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, notJSON(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "", "send one JSON object, raw or in a ```json block", "the request is not a JSON object")
	}
	obj, err := readObject(dec, "", 1)
	if err != nil {
		return nil, err
	}
	if rest := bytes.TrimSpace(raw[dec.InputOffset():]); len(rest) > 0 {
		return nil, ops.Errorf(ops.CodeInvalidArgument, "", "send exactly one JSON object and nothing after it",
			"text after the JSON object at byte %d: %q", dec.InputOffset(), ops.Echo(string(rest)))
	}
	return obj, nil
}

func notJSON(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("it ends before the object is closed")
	}
	return ops.Errorf(ops.CodeInvalidArgument, "", "send one JSON object, raw or in a ```json block", "not a JSON object: %v", err)
}

func readObject(dec *json.Decoder, path string, depth int) (map[string]any, error) {
	if depth > maxJSONDepth {
		return nil, tooDeep(path)
	}
	obj := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notJSON(err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, notJSON(fmt.Errorf("expected a key at byte %d", dec.InputOffset()))
		}
		p := joinPath(path, key)
		if _, dup := obj[key]; dup {
			return nil, ops.Errorf(ops.CodeInvalidArgument, ops.Echo(p), "give "+ops.Echo(p)+" once",
				"key %s is given twice: which one is meant is ambiguous", ops.Echo(p))
		}
		v, err := readValue(dec, p, depth)
		if err != nil {
			return nil, err
		}
		obj[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, notJSON(err)
	}
	return obj, nil
}

func readValue(dec *json.Decoder, path string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, notJSON(err)
	}
	switch d := tok.(type) {
	case json.Delim:
		if d == '{' {
			return readObject(dec, path, depth+1)
		}
		return readArray(dec, path, depth+1)
	}
	return tok, nil // string, json.Number, bool or nil
}

func readArray(dec *json.Decoder, path string, depth int) ([]any, error) {
	if depth > maxJSONDepth {
		return nil, tooDeep(path)
	}
	out := []any{}
	for i := 0; dec.More(); i++ {
		v, err := readValue(dec, fmt.Sprintf("%s[%d]", path, i), depth)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, notJSON(err)
	}
	return out, nil
}

func tooDeep(path string) error {
	return ops.Errorf(ops.CodeInvalidArgument, ops.Echo(path), "the request contract is three levels deep: operation, target, workload, controls",
		"%s nests deeper than %d levels", orTop(path), maxJSONDepth)
}

// checkDepth refuses a decoded value nesting deeper than maxJSONDepth as DecodeObject would have refused its text,
// naming the first container too deep in the order DecodeObject reads a marshalled map (keys sorted); depth is
// v's own. A request put together from decoded parts (an MCP call's arguments) nests deeper than its parts did.
func checkDepth(v any, path string, depth int) error {
	switch x := v.(type) {
	case map[string]any:
		if depth > maxJSONDepth {
			return tooDeep(path)
		}
		for _, k := range sortedKeys(x) {
			if err := checkDepth(x[k], joinPath(path, k), depth+1); err != nil {
				return err
			}
		}
	case []any:
		if depth > maxJSONDepth {
			return tooDeep(path)
		}
		for i, e := range x {
			if err := checkDepth(e, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "the request"
	}
	return strings.TrimSpace(path)
}
