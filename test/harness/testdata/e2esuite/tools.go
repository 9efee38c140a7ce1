//go:build tools

// The agnhost image's binary is built from this module too (test/harness/e2eimages.go): this
// import keeps its packages in go.mod when the harness runs `go mod tidy`.
package e2esuite

import _ "k8s.io/kubernetes/test/images/agnhost"
