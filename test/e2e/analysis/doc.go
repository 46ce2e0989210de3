// Package analysis holds the end-to-end test of what the canary analysis reads on a real
// node (analysis_test.go): Prometheus scraping Traefik as the Gateway and the pods of an
// App running test/images/demoapp, under a bounded load sent from a pod. The test builds
// only with -tags e2e_analysis until it has passed on a real node once:
//
//	make e2e E2E_PKGS=./test/e2e/analysis TESTFLAGS='-tags e2e_analysis'
package analysis
