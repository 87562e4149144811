// Command kube-apiserver is the upstream Kubernetes API server built from the
// k8s.io/kubernetes module, so tests can run a real API server without
// containers. The code is upstream's; this file only wires its entry point.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
