package controller

import "encoding/json"

// Convert copies in to out through JSON. API types, their apply configurations and the
// generic JSON form (maps, slices, strings, float64s, bools) share their JSON shape.
func Convert(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}
