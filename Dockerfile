# The loadmix image for deploy/kubernetes: built with the project's toolchain, run on a
# slim Debian with only what the binary needs (CA roots for https targets).
#   docker build -t loadmix:latest .
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked && strip target/release/loadmix

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/loadmix /usr/local/bin/loadmix
COPY workloads /usr/share/loadmix/workloads
# Not root: a load generator needs no privilege.
RUN useradd --system --uid 10001 loadmix
USER 10001
WORKDIR /home/loadmix
ENTRYPOINT []
CMD ["loadmix", "--help"]
