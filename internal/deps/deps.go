package deps

import (
	_ "github.com/go-logr/zapr"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/spf13/pflag"
	_ "github.com/spf13/viper"
	_ "go.uber.org/zap"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/multicluster-runtime/pkg/manager"
	_ "sigs.k8s.io/multicluster-runtime/providers/kubeconfig"
)
