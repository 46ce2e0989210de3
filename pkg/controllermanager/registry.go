package controllermanager

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Runnable is a controller the manager runs until its context ends.
type Runnable interface {
	Run(ctx context.Context, workers int)
}

// InitFunc builds a controller from the shared context. It registers the informers the
// controller needs; only the informers of enabled controllers are started. A controller
// with nothing to do under the given options returns a DisabledError: the manager
// reports it disabled and runs the others.
type InitFunc func(ctx context.Context, cc *ControllerContext) (Runnable, error)

// DisabledError says why an enabled controller is not run: it has nothing to do, or
// (Err set) its configuration is invalid. Either way the manager runs the other
// controllers; an invalid configuration is also logged as an error and recorded as a
// Warning Event on the controller's own Pod (Options.PodName).
type DisabledError struct {
	Reason string
	// Err is the configuration error that disabled the controller; nil when it merely
	// has nothing to do.
	Err error
}

func (e *DisabledError) Error() string {
	if e.Err != nil {
		return "disabled: " + e.Reason + ": " + e.Err.Error()
	}
	return "disabled: " + e.Reason
}

func (e *DisabledError) Unwrap() error { return e.Err }

// descriptor registers a controller under a name.
type descriptor struct {
	name string
	init InitFunc
}

// descriptors lists every controller of the binary, in start order. Names are unique.
var descriptors = []descriptor{
	{name: appControllerName, init: startAppController},
	{name: ingressControllerName, init: startIngressController},
	{name: nodeLabelControllerName, init: startNodeLabelController},
}

// KnownControllers returns the names of every registered controller.
func KnownControllers() []string {
	names := make([]string, 0, len(descriptors))
	for _, d := range descriptors {
		names = append(names, d.name)
	}
	return names
}

// IsControllerEnabled tells whether name is enabled by controllers, with the semantics of
// kube-controller-manager's --controllers: an explicit "name" or "-name" wins, then "*".
// One convenience on top: a list made only of exclusions ("-nodelabel") means every
// controller but those, where kube-controller-manager would enable none.
func IsControllerEnabled(name string, controllers []string) bool {
	star := true
	for _, c := range controllers {
		if !strings.HasPrefix(c, "-") {
			star = false
			break
		}
	}
	for _, c := range controllers {
		switch c {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			star = true
		}
	}
	return star
}

// validateControllers rejects unknown names in a --controllers list.
func validateControllers(controllers []string) error {
	known := KnownControllers()
	for _, c := range controllers {
		if c == "*" {
			continue
		}
		if !slices.Contains(known, strings.TrimPrefix(c, "-")) {
			return fmt.Errorf("--controllers: unknown controller %q; known controllers: %s", c, strings.Join(known, ", "))
		}
	}
	return nil
}
