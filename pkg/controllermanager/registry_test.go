package controllermanager

import (
	"strings"
	"testing"
)

func TestIsControllerEnabled(t *testing.T) {
	tests := []struct {
		controllers []string
		want        map[string]bool
	}{
		{[]string{"*"}, map[string]bool{"app": true, "ingress": true, "nodelabel": true}},
		{[]string{"*", "-nodelabel"}, map[string]bool{"app": true, "ingress": true, "nodelabel": false}},
		{[]string{"-nodelabel"}, map[string]bool{"app": true, "ingress": true, "nodelabel": false}},
		{[]string{"-nodelabel", "-ingress"}, map[string]bool{"app": true, "ingress": false, "nodelabel": false}},
		{[]string{"app"}, map[string]bool{"app": true, "ingress": false, "nodelabel": false}},
		{[]string{"app", "-ingress"}, map[string]bool{"app": true, "ingress": false, "nodelabel": false}},
		{[]string{"-app", "*"}, map[string]bool{"app": false, "ingress": true, "nodelabel": true}},
		{[]string{"app", "-app"}, map[string]bool{"app": true}}, // the first mention wins
		{nil, map[string]bool{"app": true, "ingress": true, "nodelabel": true}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.controllers, ","), func(t *testing.T) {
			for name, want := range tc.want {
				if got := IsControllerEnabled(name, tc.controllers); got != want {
					t.Errorf("IsControllerEnabled(%q) = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestValidateControllers(t *testing.T) {
	if err := validateControllers([]string{"*", "-nodelabel", "app", "ingress"}); err != nil {
		t.Errorf("valid list rejected: %v", err)
	}
	err := validateControllers([]string{"*", "-nodelabeler"})
	if err == nil || !strings.Contains(err.Error(), `unknown controller "-nodelabeler"`) || !strings.Contains(err.Error(), "app, ingress, nodelabel") {
		t.Errorf("error = %v, want it to name the unknown controller and list the known ones", err)
	}
}

func TestControllersFlag(t *testing.T) {
	o := NewOptions()
	v := newStringSliceValue(&o.Controllers)
	if err := v.Set("app, ingress"); err != nil {
		t.Fatal(err)
	}
	if err := v.Set("-nodelabel"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.Controllers, ","); got != "app,ingress,-nodelabel" {
		t.Errorf("controllers = %s", got)
	}
}
