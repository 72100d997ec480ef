# tephra: one static-ish binary on a small, non-root runtime image.
# Build:  docker build -t tephra:dev .
# Run:    docker run --rm -p 8443:8443 -p 8080:8080 -p 127.0.0.1:6443:6443 tephra:dev serve --embedded --embedded-api-listen 0.0.0.0:6443

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Dependencies first, so source edits do not rebuild them: a dummy main against the real lockfile.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src
COPY src ./src
COPY manifests ./manifests
# touch so cargo sees the real sources as newer than the dummy build
RUN touch src/main.rs src/lib.rs && cargo build --release --locked \
    && strip target/release/tephra

# distroless "cc" has glibc and libgcc (what a Rust binary links) and nothing else: no shell,
# no package manager. The :nonroot tag runs as uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/tephra /usr/local/bin/tephra
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/tephra"]
CMD ["serve"]
