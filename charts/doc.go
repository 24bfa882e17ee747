// Package charts holds the replicafed Helm chart (charts/replicafed) and the
// tests that lint and render it with bin/helm and check the result: the
// rendered config loads through the config package, the values schema
// refuses bad values, and RBAC stays least-privilege.
package charts
