# A small HIP program compiled for the requested gfx targets with the pinned
# ROCm seed (exprs/bootstrap: `rocm`, Debian sid's clang 21, hipcc, the HIP
# runtime; about 270 MiB of .debs).
#
#   rocmx build .#saxpy --gfx gfx90a,gfx1100
#   rocmx build .#offload-targets --gfx gfx90a,gfx1100 && cat result   # what the binary holds
#   ./result/bin/saxpy             # needs an AMD GPU (/dev/kfd)
#
# libsaxpyref (the CPU reference) compiles no GPU code: its store path is the
# same for every --gfx.
{
  description = "HIP saxpy built for the requested gfx targets";

  config.gfxTargets = {
    type = "gfx targets";
    default = [ "gfx90a" "gfx1100" ];
    description = "the GPU targets to compile for (--gfx LIST|native|all)";
  };

  outputs = { self, config }:
    let
      system = builtins.currentSystem;
      roots = import ../../exprs/bootstrap;
      stdenv = import ../../exprs/lib/stdenv { rootfs = roots.rocm; };
      gpu = import ../../exprs/lib/gpu.nix;
      licenses = import ../../exprs/lib/licenses.nix;

      saxpyref = stdenv.mkDerivation {
        pname = "libsaxpyref";
        version = "1.0";
        src = ./ref;
        dontConfigure = true;
        buildPhase = "cc -O2 -fPIC -shared -o libsaxpyref.so saxpyref.c";
        installPhase = ''
          mkdir -p $out/lib $out/include
          cp libsaxpyref.so $out/lib/
          cp saxpyref.h $out/include/
        '';
        meta.license = licenses.mit;
      };

      saxpyFor = gpuTargets:
        let
          targets = gpu.intersect {
            pname = "hip-saxpy";
            supported = [ "gfx900" "gfx906" "gfx908" "gfx90a" "gfx942" "gfx950" "gfx1030" "gfx1100" "gfx1101" "gfx1102" "gfx1200" "gfx1201" ];
            requested = gpuTargets;
          };
        in
        stdenv.mkDerivation {
          pname = "hip-saxpy";
          version = "1.0";
          src = ./src;
          buildInputs = [ saxpyref ];
          inherit gpuTargets;
          offloadArchs = map (t: "--offload-arch=${t}") targets;
          dontConfigure = true;
          buildPhase = ''
            hipcc $offloadArchs -I${saxpyref}/include saxpy.hip \
              -L${saxpyref}/lib -lsaxpyref -Wl,-rpath,${saxpyref}/lib -o saxpy
          '';
          installPhase = "mkdir -p $out/bin; cp saxpy $out/bin/";
          passthru.gpuTargets = targets;
          meta.license = licenses.mit;
        };

      saxpy = saxpyFor config.gfxTargets;

      # The code objects the binary's offload bundle holds, one per line
      # ("hipv4-amdgcn-amd-amdhsa--gfx90a"), listed with the seed's own tools.
      offloadTargets = stdenv.runCommand "saxpy-offload-targets" { } ''
        cp ${saxpy}/bin/saxpy ./saxpy && chmod u+w saxpy
        objcopy --dump-section .hip_fatbin=fatbin.o saxpy
        clang-offload-bundler --list --type=o --input=fatbin.o | sort > $out
      '';
    in
    {
      packages.${system} = {
        inherit saxpy saxpyref;
        offload-targets = offloadTargets;
        default = saxpy;
      };
      lib = { inherit saxpyFor; };
    };
}
