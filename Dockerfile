# tephra: one static-ish binary on a small, non-root runtime image.
# Build:  docker build -t tephra:dev .
# Run:    docker run --rm -p 8443:8443 -p 8080:8080 -p 127.0.0.1:6443:6443 tephra:dev serve --embedded --embedded-api-listen 0.0.0.0:6443

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Dependencies first, so source edits do not rebuild them: dummy targets against the real
# lockfile (every [[bench]] Cargo.toml declares must exist for the manifest to load).
# The workspace's member crates (crates/*) get empty libraries the same way.
COPY Cargo.toml Cargo.lock ./
COPY crates/apiserver/Cargo.toml crates/apiserver/
COPY crates/names/Cargo.toml crates/names/
COPY crates/report/Cargo.toml crates/report/
RUN mkdir src benches crates/apiserver/src crates/names/src crates/report/src \
    && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs crates/apiserver/src/lib.rs crates/names/src/lib.rs crates/report/src/lib.rs \
    && for b in $(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | tail -n +2); do echo 'fn main() {}' > "benches/$b.rs"; done \
    && cargo build --release --locked --bin tephra \
    && rm -rf src benches crates/apiserver/src crates/names/src crates/report/src
COPY src ./src
COPY crates ./crates
COPY benches ./benches
# manifests/webhooks.yaml is compiled into the binary (embedded mode registers it).
COPY manifests ./manifests
# touch so cargo sees the real sources as newer than the dummy build
RUN touch src/main.rs src/lib.rs crates/*/src/lib.rs && cargo build --release --locked --bin tephra \
    && strip target/release/tephra

# distroless "cc" has glibc and libgcc (what a Rust binary links) and nothing else: no shell,
# no package manager. The :nonroot tag runs as uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/tephra /usr/local/bin/tephra
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/tephra"]
CMD ["serve"]
