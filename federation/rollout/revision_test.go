package rollout

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

func template(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"b": "2", "a": "1"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
}

func mustHash(t *testing.T, tmpl *corev1.PodTemplateSpec, c int32) string {
	t.Helper()
	h, err := TemplateHash(tmpl, c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestTemplateHash(t *testing.T) {
	h := mustHash(t, template("nginx:1.27"), 0)
	// A fixed value: the hash is the same in every process, after every
	// restart and on every replica, so they all name a revision alike.
	if want := "6pzhcntpswbrdd"; h != want {
		t.Errorf("hash = %q, want %q: the encoding changed", h, want)
	}
	if errs := validation.IsValidLabelValue(h); len(errs) > 0 {
		t.Errorf("hash %q is not a label value: %v", h, errs)
	}
	if regexp.MustCompile(`[aeiou]`).MatchString(h) {
		t.Errorf("hash %q has a vowel", h)
	}
	// Map order and a copy do not matter; content and collision count do.
	same := template("nginx:1.27")
	same.Annotations = map[string]string{"a": "1", "b": "2"}
	if got := mustHash(t, same, 0); got != h {
		t.Errorf("equal template hashed %q, want %q", got, h)
	}
	for name, other := range map[string]string{
		"image":           mustHash(t, template("nginx:1.28"), 0),
		"collision count": mustHash(t, template("nginx:1.27"), 1),
	} {
		if other == h {
			t.Errorf("changing the %s kept the hash %q", name, h)
		}
	}
	if len(RevisionName("web", h)) > 63+1+14 {
		t.Errorf("revision name %q too long", RevisionName("web", h))
	}
}

func TestIdentify(t *testing.T) {
	v1, v2, v3 := template("app:1"), template("app:2"), template("app:3")
	h1 := mustHash(t, v1, 0)
	h2 := mustHash(t, v2, 0)
	known := []Revision{
		{Name: "web-" + h1, Hash: h1, Number: 1, Template: v1},
		{Name: "web-" + h2, Hash: h2, Number: 2, Template: v2},
	}
	cases := []struct {
		name      string
		template  *corev1.PodTemplateSpec
		collision int32
		known     []Revision
		want      Identity
	}{
		{"known template: its revision, whatever the count", template("app:1"), 5, known,
			Identity{Revision: known[0], CollisionCount: 5}},
		{"new template: next number", v3, 0, known,
			Identity{Revision: Revision{Name: "web-" + mustHash(t, v3, 0), Hash: mustHash(t, v3, 0), Number: 3, Template: v3}, New: true}},
		{"hash taken by another template: the count goes up", v3, 0,
			[]Revision{{Name: "web-" + mustHash(t, v3, 0), Hash: mustHash(t, v3, 0), Number: 7, Template: v1}},
			Identity{Revision: Revision{Name: "web-" + mustHash(t, v3, 1), Hash: mustHash(t, v3, 1), Number: 8, Template: v3}, New: true, CollisionCount: 1}},
		{"known revision found by template although its hash differs (encoding changed)", v2, 0,
			[]Revision{{Name: "web-oldhash", Hash: "oldhash", Number: 4, Template: template("app:2")}},
			Identity{Revision: Revision{Name: "web-oldhash", Hash: "oldhash", Number: 4, Template: template("app:2")}}},
		{"first template", v1, 0, nil,
			Identity{Revision: Revision{Name: "web-" + h1, Hash: h1, Number: 1, Template: v1}, New: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Identify("web", c.template, c.collision, c.known)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}
