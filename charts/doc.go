// Package charts holds the replicafed Helm chart (charts/replicafed) and its
// tests. Render tests lint and template it with bin/helm and check the result:
// the rendered config loads through the config package, the values schema
// refuses bad values, and RBAC stays least-privilege. Hub tests install it
// for real into a test kube-apiserver: TestInstallOnHub runs replicafed
// processes as the StatefulSet's pods (see podRunner for what is substituted
// on one machine) through create, scale, delete, uninstall and reinstall;
// TestUpgradeFromPrevious upgrades the previous chart (testdata) and its CRD;
// TestCRDClientSideApply applies the generated CRDs with kubectl.
package charts
