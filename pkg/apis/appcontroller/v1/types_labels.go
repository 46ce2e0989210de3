package v1

// LabelValue is the value of a label or of a node selector term: empty, or at most 63
// characters, alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric
// (what the API server accepts in an object's labels). A map of them is refused by the
// schema with the key named, not by the API server when the controller writes the child.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// LabelMap returns m as a map of strings (the labels or node selector of a child); nil if
// m is nil.
func LabelMap(m map[string]LabelValue) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}
