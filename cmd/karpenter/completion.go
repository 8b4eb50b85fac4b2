package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// completion writes a completion script for shell. The script is generated
// from the flag set, so a new flag completes without editing it; commands
// and `why`'s subjects are listed here.
func completion(w io.Writer, shell string, fs *pflag.FlagSet) error {
	var flags []string
	fs.VisitAll(func(f *pflag.Flag) {
		flags = append(flags, "--"+f.Name)
		if f.Shorthand != "" {
			flags = append(flags, "-"+f.Shorthand)
		}
	})
	sort.Strings(flags)
	script := fmt.Sprintf(bashCompletion, strings.Join(flags, " "))
	switch shell {
	case "bash":
		_, err := io.WriteString(w, script)
		return err
	case "zsh":
		// zsh runs bash completion functions through bashcompinit.
		_, err := io.WriteString(w, "autoload -U +X bashcompinit && bashcompinit\n"+script)
		return err
	default:
		return fmt.Errorf("no completion for shell %q: bash or zsh", shell)
	}
}

// bashCompletion completes commands, `why pod|node`, flags, -o's formats
// and completion's shells; %s is the flag list. It registers for both
// names the binary is installed under.
const bashCompletion = `# karpenter completion: source it, or save it in your completions directory.
_karpenter() {
  local cur prev words
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "table json yaml" -- "$cur")); return ;;
    -f|--filename|--snapshot|--kubeconfig) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    why) COMPREPLY=($(compgen -W "pod node" -- "$cur")); return ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "%s" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "status why simulate snapshot completion" -- "$cur"))
  fi
}
complete -F _karpenter karpenter
complete -F _karpenter kubectl-karpenter
`
