// Package controller holds what every controller of app-controller shares: the label
// that marks the objects they manage, the field manager they write with, informer
// transforms, tombstone handling, and the check that decides whether a server-side
// apply would change anything.
package controller
