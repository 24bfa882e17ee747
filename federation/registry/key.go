package registry

import "sigs.k8s.io/controller-runtime/pkg/client"

func clientKey(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}
