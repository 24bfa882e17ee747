package health

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// withDefaults fills what UnversionedRESTClientFor needs for raw GETs.
func withDefaults(c *rest.Config) *rest.Config {
	c.GroupVersion = &schema.GroupVersion{}
	c.APIPath = "/"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}
