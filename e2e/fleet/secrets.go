package fleet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretsInLogs scans every replica's log for the secret material the fleet
// handed out: the admin token, the ServiceAccount tokens and client keys in
// the members' kubeconfig Secrets, and each line of every replica's private
// key. It returns one finding per hit (never the secret itself).
func (f *Fleet) SecretsInLogs(ctx context.Context) ([]string, error) {
	needles := map[string]string{} // secret -> what it is
	add := func(secret, what string) {
		if len(secret) >= 16 { // short strings would match by chance
			needles[secret] = what
		}
	}
	for _, r := range f.Replicas {
		add(r.adminToken, "admin token")
		key, err := os.ReadFile(r.keyFile)
		if err != nil {
			return nil, fmt.Errorf("reading key of %s: %w", r.ID, err)
		}
		for _, line := range strings.Split(string(key), "\n") {
			if !strings.HasPrefix(line, "-----") {
				add(strings.TrimSpace(line), "private key of "+r.ID)
			}
		}
	}
	if f.secretMembers {
		var secrets corev1.SecretList
		if err := f.HubClient.List(ctx, &secrets, client.InNamespace(Namespace), client.MatchingLabels{secretLabel: "true"}); err != nil {
			return nil, fmt.Errorf("listing member kubeconfig Secrets: %w", err)
		}
		for _, s := range secrets.Items {
			kc, err := clientcmd.Load(s.Data["kubeconfig"])
			if err != nil {
				return nil, fmt.Errorf("parsing kubeconfig Secret %s: %w", s.Name, err)
			}
			for _, a := range kc.AuthInfos {
				add(a.Token, "member token of "+s.Name)
				add(string(a.ClientKeyData), "member client key of "+s.Name)
			}
		}
	}
	var found []string
	for _, r := range f.Replicas {
		fh, err := os.Open(r.LogPath)
		if err != nil {
			return nil, fmt.Errorf("opening log of %s: %w", r.ID, err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.Contains(line, "PRIVATE KEY") {
				found = append(found, fmt.Sprintf("%s line %d: a PEM private key header", r.LogPath, n))
			}
			for secret, what := range needles {
				if strings.Contains(line, secret) {
					found = append(found, fmt.Sprintf("%s line %d: %s", r.LogPath, n, what))
				}
			}
		}
		err = sc.Err()
		_ = fh.Close()
		if err != nil {
			return nil, fmt.Errorf("reading log of %s: %w", r.ID, err)
		}
	}
	return found, nil
}
