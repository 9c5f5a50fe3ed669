package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// crdSchema is the part of a CustomResourceDefinition's OpenAPI v3 schema
// the API server checks structurally: types, known fields, required
// fields, enums. Formats and CEL rules are left out.
type crdSchema struct {
	Type                 string                `json:"type"`
	Properties           map[string]*crdSchema `json:"properties"`
	Required             []string              `json:"required"`
	Items                *crdSchema            `json:"items"`
	AdditionalProperties *crdSchema            `json:"additionalProperties"`
	Enum                 []any                 `json:"enum"`
	IntOrString          bool                  `json:"x-kubernetes-int-or-string"`
	PreserveUnknown      bool                  `json:"x-kubernetes-preserve-unknown-fields"`
}

// validate returns every violation of s by v (decoded from JSON), each
// naming its path; an object field the schema does not know is one, as
// the API server's pruning would drop it silently.
func (s *crdSchema) validate(path string, v any) []string {
	if s == nil || v == nil {
		return nil
	}
	if s.IntOrString {
		switch v.(type) {
		case string, float64:
			return nil
		}
		return []string{fmt.Sprintf("%s: %v is neither an integer nor a string", path, v)}
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		return []string{fmt.Sprintf("%s: %v is not one of %v", path, v, s.Enum)}
	}
	var errs []string
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %T is not an object", path, v)}
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				errs = append(errs, fmt.Sprintf("%s.%s: required", path, r))
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch {
			case s.Properties[k] != nil:
				errs = append(errs, s.Properties[k].validate(path+"."+k, m[k])...)
			case s.AdditionalProperties != nil:
				errs = append(errs, s.AdditionalProperties.validate(path+"."+k, m[k])...)
			case !s.PreserveUnknown:
				errs = append(errs, fmt.Sprintf("%s.%s: unknown field", path, k))
			}
		}
	case "array":
		l, ok := v.([]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %T is not an array", path, v)}
		}
		for i, e := range l {
			errs = append(errs, s.Items.validate(fmt.Sprintf("%s[%d]", path, i), e)...)
		}
	case "string":
		if _, ok := v.(string); !ok {
			errs = append(errs, fmt.Sprintf("%s: %v is not a string (quote it)", path, v))
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != float64(int64(f)) {
			errs = append(errs, fmt.Sprintf("%s: %v is not an integer", path, v))
		}
	case "number":
		if _, ok := v.(float64); !ok {
			errs = append(errs, fmt.Sprintf("%s: %v is not a number", path, v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			errs = append(errs, fmt.Sprintf("%s: %v is not a boolean", path, v))
		}
	}
	return errs
}

// splitYAMLDocs splits a multi-document YAML file at its `---` lines.
func splitYAMLDocs(raw string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+raw, "\n---\n") {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
