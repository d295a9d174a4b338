package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

func newImageCmd(stdout, stderr io.Writer) *cobra.Command {
	var tf trialFlags
	open := func() (*image.Store, error) {
		o, err := tf.baseOptions(io.Discard)
		if err != nil {
			return nil, err
		}
		return image.Open(filepath.Join(o.CacheDir, trial.ImageStoreDir))
	}
	c := &cobra.Command{
		Use:   "image",
		Short: "Container images, without a daemon: import, pull, build, list, remove",
		Long: `Container images a task's [environment].docker_image names. Each is
unpacked once (layers applied in order, whiteouts, ownership and modes kept;
entries that would leave the root refused) into the store under the cache
directory, and used read-only by every trial's sandboxes. Its manifest
digest is the environment digest in the trial's bundle.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	imp := &cobra.Command{
		Use:   "import FILE|DIR",
		Short: "Import a docker save archive or an OCI image layout",
		Args:  oneArg("image import", "proctor image import FILE|DIR"),
		RunE: func(_ *cobra.Command, args []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			img, err := st.Import(args[0])
			if err != nil {
				return err
			}
			printImage(stdout, img)
			return nil
		},
	}
	pull := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry",
		Args:  oneArg("image pull", "proctor image pull REF"),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			img, err := st.Pull(c.Context(), args[0])
			if err != nil {
				return err
			}
			printImage(stdout, img)
			return nil
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the images in the store",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			imgs, err := st.List()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "DIGEST\tSIZE\tREFS")
			for _, img := range imgs {
				fmt.Fprintf(w, "%s\t%d\t%v\n", img.Digest, img.Size, img.Refs)
			}
			return w.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm REF",
		Short: "Remove an image from the store",
		Args:  oneArg("image rm", "proctor image rm REF"),
		RunE: func(_ *cobra.Command, args []string) error {
			st, err := open()
			if err != nil {
				return err
			}
			return st.Remove(args[0])
		},
	}
	for _, sub := range []*cobra.Command{imp, pull, ls, rm} {
		sub.Flags().StringVar(&tf.cacheDir, "cache-dir", "", "where images are kept, under images/ (default $PROCTOR_CACHE_DIR, else the user cache dir)")
		c.AddCommand(sub)
	}
	c.AddCommand(newImageBuildCmd(stdout, stderr))
	return c
}

func printImage(w io.Writer, img *image.Image) {
	fmt.Fprintf(w, "%s %v: %d bytes unpacked", img.Digest, img.Refs, img.Size)
	if len(img.Dropped) > 0 {
		fmt.Fprintf(w, ", %d entries dropped (device nodes)", len(img.Dropped))
	}
	fmt.Fprintln(w)
}
