// etcd, built from the etcd server module in kube-apiserver's own module graph (the version it is tested with).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
