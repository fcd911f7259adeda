//! The credit channel against the obvious alternatives: a bounded channel of the same
//! capacity (flume, async-channel). One producer, one consumer, 10,000 items, on a
//! current-thread runtime; the credit receiver grants a window of 64 up front and one
//! more per item received. Run: `cargo bench -p weir-flow --bench credit`.

use std::num::NonZeroUsize;

use weir_flow::credit;

const ITEMS: u64 = 10_000;
const WINDOW: usize = 64;

fn main() {
    divan::main();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime")
}

#[divan::bench]
fn credit_channel_window_64(bencher: divan::Bencher) {
    let rt = runtime();
    bencher.bench_local(|| {
        rt.block_on(async {
            let capacity = NonZeroUsize::new(WINDOW).expect("non-zero");
            let (mut tx, mut rx) = credit::channel::<u64>(capacity);
            let producer = tokio::spawn(async move {
                for i in 0..ITEMS {
                    tx.send(i).await.expect("receiver alive");
                }
                tx.complete();
            });
            let _ = rx.request(WINDOW as u64);
            let mut sum = 0u64;
            while let Ok(item) = rx.recv().await {
                sum += item;
                let _ = rx.request(1);
            }
            producer.await.expect("producer finished");
            divan::black_box(sum)
        })
    });
}

#[divan::bench]
fn flume_bounded_64(bencher: divan::Bencher) {
    let rt = runtime();
    bencher.bench_local(|| {
        rt.block_on(async {
            let (tx, rx) = flume::bounded::<u64>(WINDOW);
            let producer = tokio::spawn(async move {
                for i in 0..ITEMS {
                    tx.send_async(i).await.expect("receiver alive");
                }
            });
            let mut sum = 0u64;
            while let Ok(item) = rx.recv_async().await {
                sum += item;
            }
            producer.await.expect("producer finished");
            divan::black_box(sum)
        })
    });
}

#[divan::bench]
fn async_channel_bounded_64(bencher: divan::Bencher) {
    let rt = runtime();
    bencher.bench_local(|| {
        rt.block_on(async {
            let (tx, rx) = async_channel::bounded::<u64>(WINDOW);
            let producer = tokio::spawn(async move {
                for i in 0..ITEMS {
                    tx.send(i).await.expect("receiver alive");
                }
            });
            let mut sum = 0u64;
            while let Ok(item) = rx.recv().await {
                sum += item;
            }
            producer.await.expect("producer finished");
            divan::black_box(sum)
        })
    });
}
