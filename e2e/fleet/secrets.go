package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/internal/test/secretscan"
)

// SecretsInLogs scans every replica's log for the secret material the fleet
// handed out: the admin token, the ServiceAccount tokens and client keys in
// the members' kubeconfig Secrets, and each line of every replica's private
// key. It returns one finding per hit (never the secret itself).
func (f *Fleet) SecretsInLogs(ctx context.Context) ([]string, error) {
	secrets := secretscan.New()
	for _, r := range f.Replicas {
		secrets.Add(r.adminToken, "admin token")
		if err := secrets.AddPEMFile(r.keyFile, "private key of "+r.ID); err != nil {
			return nil, fmt.Errorf("reading key of %s: %w", r.ID, err)
		}
	}
	if f.secretMembers {
		var list corev1.SecretList
		if err := f.HubClient.List(ctx, &list, client.InNamespace(Namespace), client.MatchingLabels{secretLabel: "true"}); err != nil {
			return nil, fmt.Errorf("listing member kubeconfig Secrets: %w", err)
		}
		for _, s := range list.Items {
			kc, err := clientcmd.Load(s.Data["kubeconfig"])
			if err != nil {
				return nil, fmt.Errorf("parsing kubeconfig Secret %s: %w", s.Name, err)
			}
			for _, a := range kc.AuthInfos {
				secrets.Add(a.Token, "member token of "+s.Name)
				if len(a.ClientKeyData) > 0 {
					if err := secrets.AddPEM(a.ClientKeyData, "member client key of "+s.Name); err != nil {
						return nil, fmt.Errorf("reading kubeconfig Secret %s: %w", s.Name, err)
					}
				}
			}
		}
	}
	var found []string
	for _, r := range f.Replicas {
		hits, err := secrets.ScanFile(r.LogPath)
		if err != nil {
			return nil, fmt.Errorf("scanning log of %s: %w", r.ID, err)
		}
		found = append(found, hits...)
	}
	return found, nil
}
