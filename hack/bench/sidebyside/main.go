// Command sidebyside compares replicafed's member engine with
// kube-controller-manager's ReplicaSet controller on one real control plane
// (internal/test/testcluster: etcd, kube-apiserver, kube-scheduler and kwok fake
// nodes, so pods are scheduled and become Ready). Both create the same
// number of pods from the same template, in alternating runs (kcm,
// replicafed, kcm, ...), once per client setting (qps 20 / burst 30, and no
// client rate limit). Each controller runs as a child process started
// fresh for every run, talking to the API server through a counting proxy;
// per run it measures pods/s until every pod exists (seen by a watch), API
// writes per pod, CPU seconds and peak RSS. It prints a markdown table of
// medians and the replicafed/kcm ratio and writes it to -out.
//
//	make bench-sidebyside
//	go run ./hack/bench/sidebyside -pods 1000 -pairs 3
package main

import (
	"fmt"
	"os"
)

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "engine" {
		err = runEngine(os.Args[2:])
	} else {
		err = runBench(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}
