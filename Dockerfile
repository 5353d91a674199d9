# redrive container image: the `redrive` binary and its site assets (target/site).
# Built by docker-compose.yml; on a machine with internet the wasm target comes from rustup.
FROM rust:1.89-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake libcurl4-openssl-dev libssl-dev zlib1g-dev nodejs npm \
    && rm -rf /var/lib/apt/lists/*
RUN rustup target add wasm32-unknown-unknown
WORKDIR /src
COPY . .
RUN scripts/setup-wasm && scripts/build-site release && cargo build --release -p redrive

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
    && rm -rf /var/lib/apt/lists/* && useradd --system --home /var/lib/redrive --create-home redrive
COPY --from=build /src/target/release/redrive /usr/local/bin/redrive
COPY --from=build /src/target/site /usr/share/redrive/site
USER redrive
WORKDIR /var/lib/redrive
ENV REDRIVE_SITE_ROOT=/usr/share/redrive/site REDRIVE_LISTEN=0.0.0.0:3000
EXPOSE 3000
ENTRYPOINT ["redrive"]
CMD ["serve"]
