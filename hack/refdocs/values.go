package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// schema is the part of a JSON schema read here.
type schema struct {
	Ref         string             `json:"$ref"`
	Type        any                `json:"type"`
	Enum        []any              `json:"enum"`
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Items       *schema            `json:"items"`
	Definitions map[string]*schema `json:"definitions"`
	// AdditionalProperties is a schema or a bool.
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
}

// valueDoc is a row of helm-values.md.
type valueDoc struct {
	path, typ, def, description string
}

// renderValues writes helm-values.md: every value of the chart's values.yaml, with its
// type from values.schema.json, its default and the comment above it.
func renderValues(w *bytes.Buffer, chart string) error {
	data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parsing values.yaml: %w", err)
	}
	schemaData, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		return err
	}
	var root schema
	if err := json.Unmarshal(schemaData, &root); err != nil {
		return fmt.Errorf("parsing values.schema.json: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("values.yaml is not a mapping")
	}
	var rows []valueDoc
	if err := walkValues(doc.Content[0], "", &root, &root, &rows); err != nil {
		return err
	}

	name := filepath.Base(chart)
	fmt.Fprintf(w, "# Helm values of the %s chart\n\n", name)
	w.WriteString(generated(chart + "/values.yaml and values.schema.json"))
	fmt.Fprintf(w, `
Set them with `+"`--set key=value`"+` or `+"`-f my-values.yaml`"+`. values.schema.json refuses unknown keys and wrong
types, so a typo fails `+"`helm install`"+` instead of being ignored. The chart's `+"`ci/`"+` directory has
values files for common setups; [flags.md](flags.md) says what each controller flag does.

| value | type | default | |
|---|---|---|---|
`)
	for _, r := range rows {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", r.path, r.typ, code(r.def), cell(r.description))
	}
	return nil
}

// walkValues adds a row for each key of the mapping node: one for each leaf (a scalar,
// a list, an empty map), and one for a map with a comment before its keys' rows.
func walkValues(node *yaml.Node, prefix string, s, root *schema, rows *[]valueDoc) error {
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, value := node.Content[i], node.Content[i+1]
		path := prefix + key.Value
		own, sub, err := property(s, key.Value, root)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		// The comment above the key, else the schema's description of this property
		// (not that of a definition it refers to).
		description := comment(key.HeadComment)
		if description == "" && own != nil {
			description = own.Description
		}
		if value.Kind == yaml.MappingNode && len(value.Content) > 0 {
			if description != "" {
				*rows = append(*rows, valueDoc{path: path, typ: "object", description: description})
			}
			if err := walkValues(value, path+".", sub, root, rows); err != nil {
				return err
			}
			continue
		}
		def, err := flow(value)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		*rows = append(*rows, valueDoc{path: path, typ: typeOf(own, root), def: def, description: description})
	}
	return nil
}

// property returns the schema of key in s as written (own) and with its $ref followed
// (resolved); nil and nil when s allows any key.
func property(s *schema, key string, root *schema) (own, resolved *schema, err error) {
	if s == nil {
		return nil, nil, nil
	}
	s = resolve(s, root)
	if p, ok := s.Properties[key]; ok {
		return p, resolve(p, root), nil
	}
	if len(s.AdditionalProperties) > 0 && string(s.AdditionalProperties) != "false" {
		var extra schema
		if string(s.AdditionalProperties) == "true" || json.Unmarshal(s.AdditionalProperties, &extra) != nil {
			return nil, nil, nil
		}
		return &extra, resolve(&extra, root), nil
	}
	return nil, nil, fmt.Errorf("not in values.schema.json")
}

// resolve follows a local $ref (#/definitions/NAME).
func resolve(s *schema, root *schema) *schema {
	for s != nil && s.Ref != "" {
		s = root.Definitions[strings.TrimPrefix(s.Ref, "#/definitions/")]
	}
	return s
}

// typeOf describes the type a schema allows: "string", "array of string", "one of a, b",
// or the name of the definition it refers to ("duration").
func typeOf(s *schema, root *schema) string {
	if s != nil && strings.HasPrefix(s.Ref, "#/definitions/") {
		return strings.TrimPrefix(s.Ref, "#/definitions/")
	}
	s = resolve(s, root)
	if s == nil {
		return ""
	}
	if len(s.Enum) > 0 {
		values := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			values[i] = fmt.Sprint(v)
		}
		return "one of " + strings.Join(values, ", ")
	}
	var types []string
	switch t := s.Type.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, v := range t {
			types = append(types, fmt.Sprint(v))
		}
	}
	typ := strings.Join(types, " or ")
	if typ == "array" && s.Items != nil {
		if item := typeOf(s.Items, root); item != "" {
			typ += " of " + item
		}
	}
	return typ
}

// comment returns a YAML head comment as one paragraph.
func comment(text string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
	}
	return strings.TrimSpace(strings.Join(lines, " "))
}

// flow renders a value on one line, in YAML's flow style.
func flow(node *yaml.Node) (string, error) {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!str" && node.Value == "" {
		return `""`, nil
	}
	copied := *node
	setFlow(&copied)
	out, err := yaml.Marshal(&copied)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func setFlow(node *yaml.Node) {
	node.Style |= yaml.FlowStyle
	node.HeadComment, node.LineComment, node.FootComment = "", "", ""
	for i, c := range node.Content {
		copied := *c
		setFlow(&copied)
		node.Content[i] = &copied
	}
}
