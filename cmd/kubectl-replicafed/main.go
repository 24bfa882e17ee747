// Command kubectl-replicafed is the kubectl plugin for rolling
// FederatedReplicaSets: `kubectl replicafed promote|pause|resume|undo|history`.
// Installed on PATH as kubectl-replicafed, kubectl finds it by name.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/federation/rolloutctl"
	"github.com/replicafed/replicafed/internal/kubescheme"
)

// target is what every command acts on: one FederatedReplicaSet through a
// client built from the kubeconfig flags.
type target struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
}

func (t *target) resolve(name string) (client.Client, types.NamespacedName, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(t.loading, &t.overrides)
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("creating a client for the hub: %w", err)
	}
	return c, types.NamespacedName{Namespace: ns, Name: name}, nil
}

func main() {
	if err := newRoot(os.Stdout).ExecuteContext(context.Background()); err != nil {
		os.Exit(1)
	}
}

func newRoot(out io.Writer) *cobra.Command {
	t := &target{loading: clientcmd.NewDefaultClientConfigLoadingRules()}
	root := &cobra.Command{
		Use:          "kubectl-replicafed",
		Short:        "Drive the rolling update of a FederatedReplicaSet",
		SilenceUsage: true,
	}
	root.SetOut(out)
	f := root.PersistentFlags()
	f.StringVar(&t.loading.ExplicitPath, "kubeconfig", "", "path to the hub's kubeconfig file")
	f.StringVar(&t.overrides.CurrentContext, "context", "", "kubeconfig context of the hub")
	f.StringVarP(&t.overrides.Context.Namespace, "namespace", "n", "", "namespace of the FederatedReplicaSet")
	root.AddCommand(promoteCmd(t), pauseCmd(t, true), pauseCmd(t, false), undoCmd(t), historyCmd(t))
	return root
}

func promoteCmd(t *target) *cobra.Command {
	return &cobra.Command{
		Use:   "promote NAME [STAGE]",
		Short: "Let a stage that waits for promotion go on (default: the stage waiting now)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := t.resolve(args[0])
			if err != nil {
				return err
			}
			stage := ""
			if len(args) == 2 {
				stage = args[1]
			}
			stage, err = rolloutctl.Promote(cmd.Context(), c, key, stage)
			if err != nil {
				return err
			}
			cmd.Printf("federatedreplicaset.replicafed.io/%s: stage %q promoted\n", key.Name, stage)
			return nil
		},
	}
}

func pauseCmd(t *target, paused bool) *cobra.Command {
	use, short, word := "pause NAME", "Freeze the split between revisions (scaling and failover still act)", "paused"
	if !paused {
		use, short, word = "resume NAME", "Let a paused rollout go on", "resumed"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := t.resolve(args[0])
			if err != nil {
				return err
			}
			changed, err := rolloutctl.SetPaused(cmd.Context(), c, key, paused)
			if err != nil {
				return err
			}
			if !changed {
				word = "already " + word
			}
			cmd.Printf("federatedreplicaset.replicafed.io/%s %s\n", key.Name, word)
			return nil
		},
	}
}

func undoCmd(t *target) *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "undo NAME",
		Short: "Roll back to the previous revision, or to --to-revision",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := t.resolve(args[0])
			if err != nil {
				return err
			}
			rev, err := rolloutctl.Undo(cmd.Context(), c, key, to)
			if err != nil {
				return err
			}
			cmd.Printf("federatedreplicaset.replicafed.io/%s rolled back to revision %d (%s)\n", key.Name, rev.Number, rev.Name)
			return nil
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the revision to return to; 0 means the previous one")
	return cmd
}

func historyCmd(t *target) *cobra.Command {
	return &cobra.Command{
		Use:   "history NAME",
		Short: "List the kept revisions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, key, err := t.resolve(args[0])
			if err != nil {
				return err
			}
			rows, err := rolloutctl.History(cmd.Context(), c, key)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "REVISION\tNAME\tIMAGES\tCURRENT")
			for _, r := range rows {
				cur := ""
				if r.Current {
					cur = "*"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", strconv.FormatInt(r.Number, 10), r.Name, r.Images, cur)
			}
			return w.Flush()
		},
	}
}
