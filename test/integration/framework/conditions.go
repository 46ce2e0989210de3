package framework

import (
	"k8s.io/apimachinery/pkg/api/meta"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// AppCondition returns "Status/Reason" of the App's condition of conditionType, "" if it
// has none: the form the integration and end-to-end tests compare and print.
func AppCondition(app *appv1.App, conditionType string) string {
	c := meta.FindStatusCondition(app.Status.Conditions, conditionType)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}
