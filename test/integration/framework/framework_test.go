package framework

import (
	"regexp"
	"testing"
)

func TestNamespacePrefix(t *testing.T) {
	tests := []struct {
		testName string
		want     string
	}{
		{"TestDeployment", "testdeployment-"},
		{"TestApp/scale_up_to_3", "testapp-scale-up-to-3-"},
		{"TestX/#00", "testx-00-"},
		{"Test_With__Many___Underscores", "test-with-many-underscores-"},
		{"TestAVeryLongNameThatGoesOnAndOnAndOnForeverAndEver/sub", "testaverylongnamethatgoesonandonandonfor-"},
		{"0starts-with-digit", "test-0starts-with-digit-"},
		{"///", "test-"},
	}
	valid := regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?-$`)
	for _, tt := range tests {
		t.Run(tt.testName, func(t *testing.T) {
			got := namespacePrefix(tt.testName)
			if got != tt.want {
				t.Errorf("namespacePrefix(%q) = %q, want %q", tt.testName, got, tt.want)
			}
			// generateName appends 5 characters; a namespace name has at most 63.
			if len(got)+5 > 63 || !valid.MatchString(got) {
				t.Errorf("namespacePrefix(%q) = %q is not a valid generateName prefix", tt.testName, got)
			}
		})
	}
}
