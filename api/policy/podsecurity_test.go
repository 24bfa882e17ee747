package policy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/policy"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

func TestPodSecurityLevels(t *testing.T) {
	for _, l := range []policy.Level{policy.LevelPrivileged, policy.LevelBaseline, policy.LevelRestricted} {
		pols, binds, err := policy.PodSecurity(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		want := map[policy.Level]int{policy.LevelPrivileged: 0, policy.LevelBaseline: 1, policy.LevelRestricted: 2}[l]
		if len(pols) != want || len(binds) != want {
			t.Fatalf("%s: %d policies, %d bindings; want %d", l, len(pols), len(binds), want)
		}
		for i := range pols {
			if binds[i].Spec.PolicyName != pols[i].Name || len(pols[i].Spec.Validations) == 0 {
				t.Fatalf("%s: binding %q for policy %q with %d validations", l, binds[i].Spec.PolicyName, pols[i].Name, len(pols[i].Spec.Validations))
			}
		}
	}
	if _, _, err := policy.PodSecurity("strict"); err == nil {
		t.Fatal("unknown level accepted")
	}
}

// annotated sets an annotation on f's pod template.
func annotated(f *v1alpha1.FederatedReplicaSet, k, v string) *v1alpha1.FederatedReplicaSet {
	if f.Spec.Template.Annotations == nil {
		f.Spec.Template.Annotations = map[string]string{}
	}
	f.Spec.Template.Annotations[k] = v
	return f
}

// frs returns a FederatedReplicaSet whose template passes baseline but not
// restricted; mutate edits its pod spec.
func frs(name string, mutate ...func(*corev1.PodSpec)) *v1alpha1.FederatedReplicaSet {
	b := builder.FRS("default", name).PodSpec(corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: builder.DefaultImage}}})
	for _, m := range mutate {
		b.EditPodSpec(m)
	}
	return b.Obj()
}

func restrictedSpec(s *corev1.PodSpec) {
	s.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	for i := range s.Containers {
		s.Containers[i].SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
	}
}

func privileged(s *corev1.PodSpec) {
	s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
}

func hostPath(s *corev1.PodSpec) {
	s.Volumes = append(s.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
}

// startHub starts a real hub with replicafed's CRDs and returns a client
// and a context that ends with the test (3 minutes at most).
func startHub(t *testing.T) (context.Context, client.Client) {
	t.Helper()
	hubCRDs, err := crds.Hub()
	if err != nil {
		t.Fatal(err)
	}
	hub := testcluster.Start(t, testcluster.Options{Name: "hub", CRDs: hubCRDs})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cl, err := client.New(hub.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cl
}

func TestPodSecurityOnRealHub(t *testing.T) {
	ctx, cl := startHub(t)
	install := func(level policy.Level) {
		t.Helper()
		pols, binds, err := policy.PodSecurity(level)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pols {
			if err := cl.Create(ctx, pols[i]); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating policy %s: %v", pols[i].Name, err)
			}
			if err := cl.Create(ctx, binds[i]); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating binding %s: %v", binds[i].Name, err)
			}
		}
	}
	// refused waits until the object is refused (bindings take effect
	// asynchronously) and returns the message.
	refused := func(obj *v1alpha1.FederatedReplicaSet) string {
		t.Helper()
		var msg string
		waitFor(t, "refusal of "+obj.Name, func(ctx context.Context) (bool, string) {
			err := cl.Create(ctx, obj.DeepCopy(), client.DryRunAll)
			if err == nil {
				return false, "admitted"
			}
			// An expression that fails to compile or evaluate refuses
			// everything (failurePolicy Fail) with a message of its own.
			if (!apierrors.IsInvalid(err) && !apierrors.IsForbidden(err)) || strings.Contains(err.Error(), "compil") || strings.Contains(err.Error(), "evaluat") {
				t.Fatalf("creating %s: %v", obj.Name, err)
			}
			msg = err.Error()
			return true, ""
		})
		return msg
	}
	admitted := func(obj *v1alpha1.FederatedReplicaSet) {
		t.Helper()
		if err := cl.Create(ctx, obj.DeepCopy(), client.DryRunAll); err != nil {
			t.Fatalf("%s refused: %v", obj.Name, err)
		}
	}

	// Admitted before the policy: it must stay deletable and editable as
	// long as its template is left alone.
	legacy := frs("legacy", privileged)
	legacy.Finalizers = []string{"replicafed.io/cascade"}
	if err := cl.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}

	install(policy.LevelBaseline)
	cases := []struct {
		obj  *v1alpha1.FederatedReplicaSet
		want string
	}{
		{frs("privileged", privileged), "privileged containers are not allowed (securityContext.privileged): app"},
		{frs("hostpath", hostPath), "hostPath volumes are not allowed: root"},
		{frs("hostnet", func(s *corev1.PodSpec) { s.HostNetwork = true }), "spec.template.spec must not set hostNetwork, hostPID or hostIPC"},
		{frs("hostport", func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}), "hostPort is not allowed: app"},
		{frs("sysadmin", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		}), "capabilities beyond the baseline set"},
		{frs("init-priv", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		}), "privileged containers are not allowed (securityContext.privileged): setup"},
		{frs("unconfined", func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}), "seccompProfile.type may not be Unconfined"},
		{frs("sysctl", func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
		}), "only the safe sysctls"},
		// One case per field Pod Security admission's baseline level checks
		// (k8s.io/pod-security-admission v0.36 policy/check_*.go).
		{frs("hostpid", func(s *corev1.PodSpec) { s.HostPID = true }), "spec.template.spec must not set hostNetwork, hostPID or hostIPC"},
		{frs("hostipc", func(s *corev1.PodSpec) { s.HostIPC = true }), "spec.template.spec must not set hostNetwork, hostPID or hostIPC"},
		{frs("hostprocess-pod", func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}
		}), "Windows HostProcess pods are not allowed"},
		{frs("hostprocess-ctr", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(true)}}
		}), "Windows HostProcess pods are not allowed"},
		{frs("init-hostport", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 53, HostPort: 53}}}}
		}), "hostPort is not allowed: setup"},
		{frs("ephemeral-priv", func(s *corev1.PodSpec) {
			s.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}
		}), "privileged containers are not allowed (securityContext.privileged): debug"},
		{frs("apparmor-pod", func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}), "AppArmor must be RuntimeDefault or Localhost"},
		{frs("apparmor-ctr", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}), "AppArmor must be RuntimeDefault or Localhost"},
		{annotated(frs("apparmor-annotation"), "container.apparmor.security.beta.kubernetes.io/app", "unconfined"),
			"AppArmor must be RuntimeDefault or Localhost"},
		{frs("selinux-type", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}), "seLinuxOptions may not set user or role"},
		{frs("selinux-user", func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{User: "root"}}
		}), "seLinuxOptions may not set user or role"},
		{frs("selinux-role", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Role: "sysadm_r"}}
		}), "seLinuxOptions may not set user or role"},
		{frs("procmount", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}), "securityContext.procMount must be Default unless hostUsers is false: app"},
		{frs("seccomp-ctr", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}), "seccompProfile.type may not be Unconfined"},
		{frs("liveness-http-host", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)}}}
		}), "probes and lifecycle handlers may not set host (httpGet.host, tcpSocket.host): app"},
		{frs("readiness-tcp-host", func(s *corev1.PodSpec) {
			s.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(22)}}}
		}), "probes and lifecycle handlers may not set host (httpGet.host, tcpSocket.host): app"},
		{frs("startup-http-host", func(s *corev1.PodSpec) {
			s.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "example.com", Port: intstr.FromInt32(80)}}}
		}), "probes and lifecycle handlers may not set host (httpGet.host, tcpSocket.host): app"},
		{frs("poststart-http-host", func(s *corev1.PodSpec) {
			s.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1", Port: intstr.FromInt32(80)}}}
		}), "probes and lifecycle handlers may not set host (httpGet.host, tcpSocket.host): app"},
		{frs("prestop-tcp-host", func(s *corev1.PodSpec) {
			s.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(80)}}}
		}), "probes and lifecycle handlers may not set host (httpGet.host, tcpSocket.host): app"},
		{frs("init-prestop-host", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "sidecar", Image: "busybox", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1", Port: intstr.FromInt32(80)}}}}}
		}), "probes and lifecycle handlers may not set host (httpGet.host, tcpSocket.host): sidecar"},
	}
	for _, c := range cases {
		msg := refused(c.obj)
		if !strings.Contains(msg, "Pod Security baseline: "+c.want) {
			t.Errorf("%s refused with %q; want it to say %q", c.obj.Name, msg, c.want)
		}
	}
	// The same FederatedReplicaSets without the offending fields.
	admitted(frs("plain"))
	admitted(frs("netbind", func(s *corev1.PodSpec) {
		s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}
		s.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}))
	// What baseline allows of the same fields.
	admitted(annotated(frs("allowed-baseline", func(s *corev1.PodSpec) {
		s.HostUsers = ptr.To(false)
		s.SecurityContext = &corev1.PodSecurityContext{
			SeccompProfile:  &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
			SELinuxOptions:  &corev1.SELinuxOptions{Type: "container_engine_t", Level: "s0:c1,c2"},
			Sysctls:         []corev1.Sysctl{{Name: "net.ipv4.tcp_rmem", Value: "4096 87380 6291456"}, {Name: "net.ipv4.tcp_wmem", Value: "4096 16384 4194304"}},
		}
		s.Containers[0].SecurityContext = &corev1.SecurityContext{
			ProcMount:       ptr.To(corev1.UnmaskedProcMount), // allowed with hostUsers: false
			AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("k8s-nginx")},
			WindowsOptions:  &corev1.WindowsSecurityContextOptions{HostProcess: ptr.To(false)},
		}
		s.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}}
		s.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	}), "container.apparmor.security.beta.kubernetes.io/app", "localhost/k8s-nginx"))
	admitted(annotated(frs("apparmor-empty-annotation"), "container.apparmor.security.beta.kubernetes.io/app", ""))
	// An update cannot sneak a privileged container in.
	live := frs("updated")
	if err := cl.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	privileged(&live.Spec.Template.Spec)
	if err := cl.Update(ctx, live); err == nil || !strings.Contains(err.Error(), "privileged containers are not allowed") {
		t.Fatalf("update adding a privileged container: %v", err)
	}

	// The legacy object: a template change is checked, metadata is not.
	privileged(&legacy.Spec.Template.Spec)
	legacy.Spec.Template.Spec.Containers = append(legacy.Spec.Template.Spec.Containers, corev1.Container{Name: "second", Image: "busybox"})
	if err := cl.Update(ctx, legacy); err == nil || !strings.Contains(err.Error(), "privileged containers are not allowed") {
		t.Fatalf("template change of a pre-policy FederatedReplicaSet: %v", err)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(legacy), legacy); err != nil {
		t.Fatal(err)
	}
	legacy.Labels = map[string]string{"team": "x"}
	if err := cl.Update(ctx, legacy); err != nil {
		t.Fatalf("label edit of a pre-policy FederatedReplicaSet refused: %v", err)
	}
	if err := cl.Delete(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(legacy), legacy); err != nil {
		t.Fatal(err)
	}
	legacy.Finalizers = nil
	if err := cl.Update(ctx, legacy); err != nil {
		t.Fatalf("releasing the finalizer of a pre-policy FederatedReplicaSet refused: %v", err)
	}

	install(policy.LevelRestricted)
	// The API server reports the first failing rule, so each case breaks one.
	admitted(frs("restricted", restrictedSpec))
	// The pod-level settings may instead be made on every container.
	admitted(frs("per-container", restrictedSpec, func(s *corev1.PodSpec) {
		s.SecurityContext = nil
		s.Containers[0].SecurityContext.RunAsNonRoot = ptr.To(true)
		s.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}))
	// When both bound policies refuse an object, either may be the one the
	// API server reports.
	alsoAccepted := map[string]string{"hostpath-r": "Pod Security restricted: only configMap"}
	for _, c := range []struct {
		obj  *v1alpha1.FederatedReplicaSet
		want string
	}{
		{frs("plain-restricted"), "Pod Security restricted: securityContext.allowPrivilegeEscalation must be false: app"},
		{frs("escalation", restrictedSpec, func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil }),
			"Pod Security restricted: securityContext.allowPrivilegeEscalation must be false: app"},
		{frs("nonroot", restrictedSpec, func(s *corev1.PodSpec) { s.SecurityContext.RunAsNonRoot = nil }),
			"Pod Security restricted: runAsNonRoot must be true (pod or container securityContext): app"},
		{frs("seccomp", restrictedSpec, func(s *corev1.PodSpec) { s.SecurityContext.SeccompProfile = nil }),
			"Pod Security restricted: seccompProfile.type must be RuntimeDefault or Localhost (pod or container securityContext): app"},
		{frs("dropall", restrictedSpec, func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Capabilities = nil }),
			"Pod Security restricted: securityContext.capabilities.drop must include ALL: app"},
		{frs("root", restrictedSpec, func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](0) }), "Pod Security restricted: runAsUser may not be 0"},
		{frs("hostpath-r", restrictedSpec, hostPath), "Pod Security baseline: hostPath volumes are not allowed: root"},
		{frs("nfs", restrictedSpec, func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}}}
		}), "Pod Security restricted: only configMap"},
		{frs("chown", restrictedSpec, func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"CHOWN"}
		}), "Pod Security restricted: only NET_BIND_SERVICE may be added"},
	} {
		if msg := refused(c.obj); !strings.Contains(msg, c.want) && (alsoAccepted[c.obj.Name] == "" || !strings.Contains(msg, alsoAccepted[c.obj.Name])) {
			t.Errorf("%s refused with %q; want it to say %q", c.obj.Name, msg, c.want)
		}
	}
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, msg := cond(ctx)
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached; last: %s", what, fmt.Sprint(last))
	}
}
