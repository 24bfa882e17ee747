// Package test holds no code: its subpackages are test support only (real
// control planes, fault proxies, test certificates and workloads), kept
// apart so the product's packages stand alone. The product binary must not
// depend on any of them; TestProductDoesNotImportTestSupport checks that.
package test
