package main

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestRequireMapKeys checks that each key of a list of type map, at any depth, ends up
// required unless it is already required or has a default, and that other lists are
// left alone.
func TestRequireMapKeys(t *testing.T) {
	schema := `
properties:
  status:
    properties:
      conditions:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [type]
        items:
          properties:
            type: {type: string}
            status: {type: string}
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [port, protocol]
        items:
          required: [port]
          properties:
            port: {type: integer}
            protocol: {type: string, default: TCP}
      byName:
        type: object
        additionalProperties:
          type: array
          x-kubernetes-list-type: map
          x-kubernetes-list-map-keys: [name, zone]
          items:
            required: [zone]
            properties:
              name: {type: string}
              zone: {type: string}
      tags:
        type: array
        x-kubernetes-list-type: set
        items: {type: string}
`
	var s map[string]any
	if err := yaml.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	requireMapKeys(s)
	for _, tt := range []struct {
		path []string
		want []any
	}{
		{[]string{"properties", "status", "properties", "conditions", "items", "required"}, []any{"type"}},
		{[]string{"properties", "status", "properties", "ports", "items", "required"}, []any{"port"}},
		{[]string{"properties", "status", "properties", "byName", "additionalProperties", "items", "required"}, []any{"name", "zone"}},
		{[]string{"properties", "status", "properties", "tags", "items", "required"}, nil},
	} {
		got, _ := dig(s, tt.path...).([]any)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v = %v, want %v", tt.path, got, tt.want)
		}
	}
}
