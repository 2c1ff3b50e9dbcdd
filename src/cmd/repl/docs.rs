//! One-line documentation of the builtins, for `rocmx repl`'s `:doc`.
//!
//! The evaluator keeps no documentation of its primops, so the table lives
//! here: the synopsis (the arguments, as Nix's manual names them) and one
//! sentence. `docs_cover_every_builtin` (in `tests/repl.rs`) checks that every
//! name of the `builtins` set has an entry.

/// `(name, arguments, description)`, sorted by name.
pub(crate) const DOCS: &[(&str, &str, &str)] = &[
    ("abort", "s", "Abort evaluation with the message s; unlike throw, tryEval cannot catch it."),
    ("add", "e1 e2", "The sum of the numbers e1 and e2."),
    ("addDrvOutputDependencies", "s", "A string context element of s naming a .drv becomes a dependency on all of its outputs."),
    ("addErrorContext", "msg e", "Evaluate e; if it fails, add msg as a \"while …\" frame to the error."),
    ("all", "pred list", "Whether pred returns true for every element of list."),
    ("any", "pred list", "Whether pred returns true for at least one element of list."),
    ("appendContext", "s context", "s with the string context described by the set context added."),
    ("attrNames", "set", "The names of the attributes of set, sorted."),
    ("attrValues", "set", "The values of the attributes of set, in the order of their sorted names."),
    ("baseNameOf", "x", "The last component of the path or string x."),
    ("bitAnd", "e1 e2", "The bitwise AND of the integers e1 and e2."),
    ("bitOr", "e1 e2", "The bitwise OR of the integers e1 and e2."),
    ("bitXor", "e1 e2", "The bitwise XOR of the integers e1 and e2."),
    ("break", "v", "Return v (a breakpoint under a debugger; rocmx has none)."),
    ("builtins", "", "The set of all builtins."),
    ("catAttrs", "attr list", "The values of the attribute attr in the sets of list that have it."),
    ("ceil", "double", "The smallest integer not less than the number double."),
    ("compareVersions", "s1 s2", "-1, 0 or 1 as the version s1 is older than, equal to or newer than s2."),
    ("concatLists", "lists", "The concatenation of a list of lists."),
    ("concatMap", "f list", "The concatenation of the lists f returns for each element of list."),
    ("concatStringsSep", "separator list", "The strings of list joined with separator between them."),
    ("convertHash", "args", "A hash (args.hash, optionally args.hashAlgo) in the encoding args.toHashFormat."),
    ("currentSystem", "", "The platform evaluation runs for, e.g. \"x86_64-linux\"."),
    ("currentTime", "", "The time evaluation started, in seconds since the Unix epoch."),
    ("deepSeq", "e1 e2", "Evaluate e1 completely (nested values too), then return e2."),
    ("derivation", "attrs", "A derivation built by attrs.builder with attrs.args; its outputs become attributes."),
    ("derivationStrict", "attrs", "The primitive under derivation: writes the .drv and returns drvPath and the output paths."),
    ("dirOf", "s", "The directory part of the path or string s."),
    ("div", "e1 e2", "The quotient of the numbers e1 and e2 (integer division for integers)."),
    ("elem", "x xs", "Whether x is an element of the list xs."),
    ("elemAt", "xs n", "The element of the list xs at index n (from 0)."),
    ("false", "", "The Boolean false."),
    ("fetchGit", "args", "Fetch a git repository (a URL or a set with url, rev, ref, …) into the store."),
    ("fetchMercurial", "args", "Fetch a Mercurial repository into the store (not supported by rocmx)."),
    ("fetchTarball", "args", "Download and unpack a tarball (a URL or a set with url and sha256) into the store."),
    ("fetchTree", "input", "Fetch a source tree described by a flake input (set or URL) into the store."),
    ("fetchurl", "url", "Download url into the store (the builtin fetcher; arg may be a set with url and sha256)."),
    ("filter", "f list", "The elements of list for which f returns true."),
    ("filterSource", "e path", "Copy path to the store keeping only the files for which e (path, type) returns true."),
    ("findFile", "search-path lookup-path", "Resolve lookup-path (as in <lookup-path>) against the list search-path."),
    ("flakeRefToString", "attrs", "The URL form of the flake reference described by the set attrs."),
    ("floor", "double", "The largest integer not greater than the number double."),
    ("foldl'", "op nul list", "Fold list from the left with op, starting from nul, forcing each step."),
    ("fromJSON", "e", "The value described by the JSON text e."),
    ("fromTOML", "e", "The value described by the TOML text e."),
    ("functionArgs", "f", "The formal arguments of the function f, each mapped to whether it has a default."),
    ("genList", "generator length", "The list [ (generator 0) … (generator (length - 1)) ]."),
    ("genericClosure", "attrset", "The closure of attrset.startSet under attrset.operator, unique by each element's key."),
    ("getAttr", "s set", "The attribute named s of set (like set.${s})."),
    ("getContext", "s", "The string context of s as a set of store paths."),
    ("getEnv", "s", "The value of the environment variable s, or \"\" when it is unset."),
    ("getFlake", "args", "The outputs of the flake named by the flake reference args."),
    ("groupBy", "f list", "The elements of list grouped by the string f returns for each: a set of lists."),
    ("hasAttr", "s set", "Whether set has an attribute named s (like set ? ${s})."),
    ("hasContext", "s", "Whether the string s has a string context (refers to store paths)."),
    ("hashFile", "type p", "The base-16 hash (md5, sha1, sha256 or sha512) of the file at p."),
    ("hashString", "type s", "The base-16 hash (md5, sha1, sha256 or sha512) of the string s."),
    ("head", "list", "The first element of list."),
    ("import", "path", "Evaluate the Nix file at path (its default.nix for a directory)."),
    ("intersectAttrs", "e1 e2", "The attributes of e2 whose names are also in e1."),
    ("isAttrs", "e", "Whether e is a set."),
    ("isBool", "e", "Whether e is a Boolean."),
    ("isFloat", "e", "Whether e is a float."),
    ("isFunction", "e", "Whether e is a function."),
    ("isInt", "e", "Whether e is an integer."),
    ("isList", "e", "Whether e is a list."),
    ("isNull", "e", "Whether e is null (deprecated: write e == null)."),
    ("isPath", "e", "Whether e is a path."),
    ("isString", "e", "Whether e is a string."),
    ("langVersion", "", "The version of the Nix language the evaluator implements."),
    ("length", "e", "The number of elements of the list e."),
    ("lessThan", "e1 e2", "Whether e1 < e2 (numbers, strings, paths or lists)."),
    ("listToAttrs", "e", "A set from a list of { name = …; value = …; } sets; the first of a name wins."),
    ("map", "f list", "The list of f applied to each element of list."),
    ("mapAttrs", "f attrset", "attrset with each value v of name n replaced by f n v."),
    ("match", "regex str", "null if regex does not match all of str, else the list of its groups."),
    ("mul", "e1 e2", "The product of the numbers e1 and e2."),
    ("nixPath", "", "The search path (-I, ROCMX_PATH, NIX_PATH) as a list of { prefix; path; } sets."),
    ("nixVersion", "", "The version of Nix the evaluator presents itself as."),
    ("null", "", "The null value."),
    ("parseDrvName", "s", "Split a package name s into { name; version; } at the first dash followed by a digit."),
    ("parseFlakeRef", "flake-ref", "The set describing the flake reference given as a URL string."),
    ("partition", "pred list", "{ right = elements for which pred is true; wrong = the others; }."),
    ("path", "args", "Copy args.path to the store, optionally filtered (filter), named (name) or checked (sha256)."),
    ("pathExists", "path", "Whether path exists."),
    ("placeholder", "output", "The placeholder that stands for the output path of output in a derivation's attributes."),
    ("readDir", "path", "The entries of the directory path, each mapped to its type (regular, directory, symlink, unknown)."),
    ("readFile", "path", "The contents of the file at path, as a string."),
    ("readFileType", "p", "The type of the file at p: regular, directory, symlink or unknown."),
    ("removeAttrs", "set list", "set without the attributes named in list."),
    ("replaceStrings", "from to s", "s with each occurrence of a string of from replaced by the matching one of to."),
    ("scopedImport", "scope path", "Like import, with the attributes of scope added to the file's scope."),
    ("seq", "e1 e2", "Evaluate e1 (to its outermost constructor), then return e2."),
    ("sort", "comparator list", "list sorted (stably) by the less-than function comparator."),
    ("split", "regex str", "str split at the matches of regex: the pieces, with the groups of each match between them."),
    ("splitVersion", "s", "The components of the version string s, as compareVersions sees them."),
    ("storeDir", "", "The logical store directory, /rocmx/store."),
    ("storePath", "path", "path, which must be in the store, with the context of that store path."),
    ("stringLength", "e", "The length of the string e in bytes."),
    ("sub", "e1 e2", "The difference of the numbers e1 and e2."),
    ("substring", "start len s", "The part of s from byte start, len bytes long (to the end when too long)."),
    ("tail", "list", "list without its first element."),
    ("throw", "s", "Fail with the message s (tryEval can catch it)."),
    ("toFile", "name s", "Write the string s to the store as a file called name and return its path."),
    ("toJSON", "e", "e rendered as JSON text (derivations and paths as store paths)."),
    ("toPath", "s", "The absolute path s (deprecated: use /. + s)."),
    ("toString", "e", "e converted to a string (numbers, paths, lists, sets with outPath or __toString)."),
    ("toXML", "e", "e rendered as the XML of nix-instantiate --xml."),
    ("trace", "e1 e2", "Print e1 on standard error, then return e2."),
    ("traceVerbose", "e1 e2", "Like trace when tracing is verbose; otherwise just e2."),
    ("true", "", "The Boolean true."),
    ("tryEval", "e", "{ success = true; value = e; } or, when e throws, { success = false; value = false; }."),
    ("typeOf", "e", "The type of e as a string: int, bool, string, path, null, set, list, lambda or float."),
    ("unsafeDiscardOutputDependency", "s", "s with dependencies on a derivation's outputs turned into a dependency on the .drv alone."),
    ("unsafeDiscardStringContext", "s", "s without its string context."),
    ("unsafeGetAttrPos", "s set", "The position { file; line; column; } where attribute s of set is defined, or null."),
    ("warn", "msg e", "Print msg as a warning on standard error, then return e."),
    ("zipAttrsWith", "f list", "For each name in the sets of list: f name [ the values it has in them ]."),
];

/// The entry of builtin `name` (`map`, `builtins.map` and `__map` alike).
pub(crate) fn lookup(name: &str) -> Option<(&'static str, &'static str, &'static str)> {
    let name = name.trim();
    let name = name.strip_prefix("builtins.").unwrap_or(name);
    let name = name.strip_prefix("__").unwrap_or(name);
    DOCS.binary_search_by(|(n, _, _)| (*n).cmp(name))
        .ok()
        .map(|i| DOCS[i])
}

/// `:doc`'s text for an entry.
pub(crate) fn render(entry: (&str, &str, &str)) -> String {
    let (name, args, doc) = entry;
    let synopsis = if args.is_empty() {
        format!("builtins.{name}")
    } else {
        format!("builtins.{name} {args}")
    };
    format!("Synopsis: {synopsis}\n\n    {doc}\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn sorted_and_unique() {
        for w in super::DOCS.windows(2) {
            assert!(w[0].0 < w[1].0, "{} before {}", w[0].0, w[1].0);
        }
    }

    #[test]
    fn lookup_forms() {
        for n in ["map", "builtins.map", "__map"] {
            assert_eq!(super::lookup(n).map(|e| e.0), Some("map"));
        }
        assert!(super::lookup("nope").is_none());
    }
}
