// Package v1 is version v1 of the appcontroller.k8s.io API: the App custom resource,
// which describes an application as one Deployment and one Service.
//
// +k8s:deepcopy-gen=package
// +groupName=appcontroller.k8s.io
package v1
